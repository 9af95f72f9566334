"""The speculative decoding loop: proposer → target → rule (docs/DESIGN.md §6).

One loop for the text LLM and the codec LM. No I/O and no torch: targets and
proposers plug in through the protocols of ``spec.types`` (model-backed ones
live in ``voicepipe.nn``), the acceptance rule is a ``spec.rules`` object, K is
chosen by a ``spec.adaptive`` controller, and the clock is injected so tests
need no timers.

One step: the proposer drafts K tokens (``Proposal``); the target scores the
last emitted token plus the K drafts in one pass (``Scores``: K+1 rows); the
rule keeps a prefix and supplies the next token; the target's cache is rolled
back past the rejected drafts. Under greedy verification a target that can
score trees (``Target.tree``) also verifies the proposal's sibling leaves.

``prefill`` either returns the logits after the prompt (the text LLM: its
first token is chosen from them) or None (the codec LM: its cache starts
empty and the first step scores the prompt's last token — the start symbol —
together with the first drafts).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from voicepipe.speculative import accept
from voicepipe.speculative.adaptive import AdaptiveK, CostAwareK, KController
from voicepipe.speculative.metrics import SpecMetrics
from voicepipe.speculative.rules import Greedy, Rule, for_sampling
from voicepipe.speculative.sampling import SamplingParams
from voicepipe.speculative.types import Proposal, Proposer, Scores, Target


class ScoreCall(NamedTuple):
    """``steps`` needs the target's scores of these tokens (``Target.score``'s arguments)."""

    tokens: list[int]
    parents: list[int] | None = None


@dataclass(frozen=True)
class PrefillCall:
    """``steps`` needs ``Target.prefill(tokens)``'s logits."""

    tokens: list[int]


class ForceCall(NamedTuple):
    """``steps`` needs the tokens fed after the cache and only the last one's logits (a
    tool call's forced text: ``Target.extend``, or the last row of ``Target.score``)."""

    tokens: list[int]


class ProposeCall(NamedTuple):
    """``steps`` needs ``Proposer.propose(context, k)`` (only with ``defer_proposals``)."""

    context: list[int]
    k: int


Call = ScoreCall | PrefillCall | ProposeCall | ForceCall
Step = Generator[Call | list[int], Scores | np.ndarray | Proposal | None, None]


class SpeculativeDecoder:
    """Generates with a target and an optional proposer; yields tokens step by step.

    ``rule`` defaults to the one that keeps ``sampling``'s distribution (greedy:
    token-identical to plain greedy decoding; else the exact rule). K: a
    ``controller()`` per generation when given, else ``CostAwareK`` for draft
    models (``draft_cost`` > 0: each drafted token costs that many target decodes)
    and ``AdaptiveK.for_text`` otherwise.
    """

    def __init__(
        self,
        target: Target,
        proposer: Proposer | None = None,
        sampling: SamplingParams | None = None,
        k: int = 4,
        adaptive: bool = True,
        k_max: int = 8,
        clock: Callable[[], int] = time.perf_counter_ns,
        verify_cost: float = 1.5,
        draft_cost: float = 0.0,
        rule: Rule | None = None,
        controller: Callable[[], KController] | None = None,
    ) -> None:
        self.target = target
        self.proposer = proposer
        self.sp = sampling or SamplingParams()
        self.rule = rule or for_sampling(self.sp)
        self.rng = np.random.default_rng(self.sp.seed)
        self.k_init, self.adaptive, self.k_max = k, adaptive, k_max
        self.verify_cost = verify_cost  # AdaptiveK.for_text's pause threshold
        self.draft_cost = draft_cost
        self.controller = controller
        self.clock = clock
        self.metrics = SpecMetrics()
        self.k_cap: int | None = None  # a batch scheduler's cap on the drafts (steps)
        # steps() yields a ProposeCall instead of calling the proposer: a batch scheduler
        # then drafts for several sessions in the same draft-model passes (the codec LM's).
        self.defer_proposals = False
        self._tree = bool(getattr(target, "tree", False))  # optional in the protocol
        # Tool calls' fixed text (speculative/jump.py), asked before the proposer each
        # step: a ``certain`` proposal is fed unverified in one pass (ForceCall), anything
        # else it proposes is verified like a draft.
        self.forcer: Proposer | None = None
        self._stops: set[int] | frozenset[int] = frozenset()

    def _controller(self) -> KController:
        if self.controller is not None:
            return self.controller()
        if self.draft_cost > 0 and self.adaptive:
            return CostAwareK(self.draft_cost, k_max=self.k_max)
        return AdaptiveK.for_text(
            self.k_init, k_max=self.k_max, adaptive=self.adaptive, verify_cost=self.verify_cost
        )

    def generate(
        self,
        prompt: list[int],
        max_new_tokens: int,
        stop_ids: set[int] | frozenset[int] = frozenset(),
    ) -> Iterator[list[int]]:
        """Yields the tokens each step emits (a stop token ends the stream, included)."""
        g = self.steps(prompt, max_new_tokens, stop_ids)
        reply: Scores | np.ndarray | Proposal | None = None
        while True:
            try:
                item = g.send(reply)
            except StopIteration:
                return
            if isinstance(item, ScoreCall):  # (a chain: targets without trees take no parents)
                t = self.target
                reply = t.score(item.tokens) if item.parents is None else t.score(*item)
            elif isinstance(item, PrefillCall):
                reply = self.target.prefill(item.tokens)
            elif isinstance(item, ForceCall):
                ext = getattr(self.target, "extend", None)
                reply = ext(item.tokens) if ext is not None else self.target.score(item.tokens)
            elif isinstance(item, ProposeCall):
                assert self.proposer is not None
                reply = self.proposer.propose(item.context, item.k)
            else:
                reply = None
                yield item

    def steps(
        self,
        prompt: list[int],
        max_new_tokens: int,
        stop_ids: set[int] | frozenset[int] = frozenset(),
    ) -> Step:
        """``generate`` with its target passes left to the caller: yields a ``ScoreCall``
        or ``PrefillCall`` (and with ``defer_proposals`` a ``ProposeCall``) and expects its
        result sent back, or a step's tokens (send None). A batch scheduler runs several
        sessions' calls in one model pass this way (voicepipe/nn/llm/batched.py). ``k_cap``,
        read before each step's proposal, caps that step's drafts (None: no cap)."""
        self.metrics = m = SpecMetrics()
        self._stops = stop_ids
        ctl = self._controller()
        if self.proposer is None or self.k_init <= 0:
            ctl.off_steps = 1 << 62
        logits = yield PrefillCall(list(prompt))
        seq = list(prompt)
        produced = 0
        if logits is not None:  # the first token comes from the prompt's own pass
            m.target_passes += 1
            assert isinstance(logits, np.ndarray)
            first = self.rule.verify([], None, Scores(np.asarray(logits)[None]), self.rng)
            seq.append(first.next_token)
            produced = m.tokens = 1
            yield [first.next_token]
            if first.next_token in stop_ids:
                return
        last = seq[-1]
        while produced < max_new_tokens:
            out = yield from self._step(seq, last, max_new_tokens - produced, ctl, stop_ids)
            for i, tok in enumerate(out):  # cut at a stop token
                if tok in stop_ids:
                    out = out[: i + 1]
                    break
            out = out[: max_new_tokens - produced]
            seq += out
            produced += len(out)
            m.tokens = produced
            last = out[-1]
            yield out
            if last in stop_ids:
                break

    def _step(
        self,
        seq: list[int],
        last: int,
        left: int,
        ctl: KController,
        stop_ids: set[int] | frozenset[int],
    ) -> Generator[Call, Scores | np.ndarray | Proposal | None, list[int]]:
        """One step: its target pass asked of the caller; the tokens it emits (``left``:
        how many the reply may still take)."""
        m = self.metrics
        clock = self.clock
        t0 = clock()
        k = min(ctl.next_k(), left - 1)
        if self.k_cap is not None:
            k = min(k, self.k_cap)
        prop = Proposal(tokens=[])
        forced: list[int] = []  # fixed tokens fed unverified before the drafts
        if self.forcer is not None:
            fp = self.forcer.propose(seq, left - 1)
            if fp.certain:
                forced = self._cut_forced(fp.tokens)
            else:
                prop = fp
        if forced and forced[-1] in stop_ids:  # the turn ends: nothing to compute
            m.forced += len(forced)
            m.forced_steps += 1
            return forced
        forcer_drafted = bool(prop.tokens)
        k = min(k, left - len(forced) - 1)
        if not prop.tokens and k > 0 and self.proposer is not None:
            # (after a forced run the proposer drafts on from its end, in the same pass)
            if self.defer_proposals:
                got_p = yield ProposeCall([*seq, *forced], k)
                assert isinstance(got_p, Proposal)
                prop = got_p
            else:
                prop = self.proposer.propose([*seq, *forced], k)
        if forced and not prop.tokens:
            out = yield from self._forced(forced, last)
            m.time_propose_ns += clock() - t0  # (with the pass: a forced step's time)
            return out
        t1 = clock()
        drafts = list(prop.tokens)
        base = self.target.length  # the cache holds seq[:-1]
        nf = len(forced)
        greedy = isinstance(self.rule, Greedy)
        sibs = prop.siblings if drafts and greedy and self._tree and not nf else ()
        if sibs:  # a tree: the chain, then each sibling after the row before its alternative
            parents = [-1, *range(len(drafts)), *(d for d, _ in sibs)]
            got = yield ScoreCall([last, *drafts, *(x for _, x in sibs)], parents)
        else:
            got = yield ScoreCall([last, *forced, *drafts])
        assert isinstance(got, Scores)
        scores = got
        if nf:  # the drafts are verified from the forced run's last row on
            best = None if got.best is None else got.best[nf:]
            scores = Scores(got.logits[nf:], best)
            m.forced += nf
            m.forced_steps += 1
        t2 = clock()
        if sibs:
            tree = accept.greedy_siblings(np.asarray(drafts), sibs, scores.logits, scores.best)
            n_acc = len(tree.tokens)
            if tree.sibling_row >= 0:  # its keys move to the position it now holds
                self.target.move(base + tree.sibling_row, base + n_acc)
                m.sibling_hits += 1
            m.siblings += len(sibs)
            out = [*tree.tokens, tree.next_token]
        else:
            res = self.rule.verify(drafts, prop.probs, scores, self.rng)
            n_acc = res.n_accepted
            out = [*forced, *drafts[:n_acc], res.next_token]  # (res.emitted, no numpy)
        self.target.rollback(base + 1 + nf + n_acc)
        t3 = clock()
        m.steps += 1
        m.target_passes += 1
        m.record(len(drafts), n_acc)
        m.time_propose_ns += t1 - t0
        m.time_score_ns += t2 - t1
        m.time_verify_ns += t3 - t2
        if not forcer_drafted:  # (the forcer's drafts say nothing of the proposer's)
            ctl.update(len(drafts), n_acc)
        return out

    def _cut_forced(self, tokens: list[int]) -> list[int]:
        """A certain proposal up to its first stop token (nothing follows the turn's end)."""
        for i, t in enumerate(tokens):
            if t in self._stops:
                return list(tokens[: i + 1])
        return list(tokens)

    def _forced(
        self, forced: list[int], last: int
    ) -> Generator[Call, Scores | np.ndarray | Proposal | None, list[int]]:
        """One step of fixed tokens without drafts: fed with ``last`` in one pass, whose
        last row alone (``Target.extend``) picks the next token."""
        m = self.metrics
        m.forced += len(forced)
        m.forced_steps += 1
        got = yield ForceCall([last, *forced])
        row = got.logits[-1] if isinstance(got, Scores) else np.asarray(got)
        assert isinstance(row, np.ndarray)
        nxt = self.rule.verify([], None, Scores(row[None]), self.rng).next_token
        m.steps += 1
        m.target_passes += 1
        m.record(0, 0)
        return [*forced, nxt]
