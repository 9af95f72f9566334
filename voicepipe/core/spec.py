"""Speculative decoding loop: proposer → scorer → verifier (docs/DESIGN.md §6).

No I/O and no torch: the target model and the drafter plug in through the
``Target`` and ``Proposer`` protocols (``voicepipe.nn.engine`` implements
them for GGUF models; ``voicepipe.core.ngram`` is a model-free proposer), and
the clock is injected so tests need no timers.

One step: the proposer drafts K tokens (``Proposal``); the target scores the
last accepted token plus the K drafts in one pass (``Scores``: K+1 rows); an
acceptance rule of ``voicepipe.core.accept`` keeps a prefix and supplies the
next token; the target's cache is rolled back past the rejected drafts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from voicepipe.core import accept
from voicepipe.core.cost_k import CostAwareK
from voicepipe.nn.sampling import SamplingParams, draw, probs


@dataclass(frozen=True)
class Proposal:
    tokens: list[int]  # (K,) drafts, K may be 0 (nothing to propose)
    probs: np.ndarray | None = None  # (K, V) draft distributions; None: deterministic drafter
    # (d, x): x is an alternative to tokens[d] (a draft tree's leaf), verified in the
    # same pass under greedy sampling when the target can (``Target.tree``).
    siblings: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Scores:
    logits: np.ndarray  # (K+1, V) target logits; row i scores the token after fed token i
    best: np.ndarray | None = None  # (K+1,) each row's argmax, if the target found it


class Target(Protocol):
    length: int  # positions held in the target's KV cache
    tree: bool  # optional (absent: False): score() takes parents, and move() exists

    def prefill(self, tokens: list[int]) -> np.ndarray:
        """Make the cache hold exactly ``tokens``; logits (V,) after the last one."""
        ...

    def score(self, tokens: list[int], parents: list[int] | None = None) -> Scores:
        """Feed tokens after the cache; logits for each. parents: the tokens form a
        tree (token i follows token parents[i]; -1 for the first), each scored on
        its own path."""
        ...

    def rollback(self, length: int) -> None: ...

    def move(self, src: int, dst: int) -> None:
        """Cache slot src now holds position dst (an accepted sibling's keys)."""
        ...


class Proposer(Protocol):
    name: str

    def propose(self, context: list[int], k: int) -> Proposal:
        """Up to k drafts to follow ``context`` (prompt + every token emitted so far)."""
        ...

    def reset(self) -> None: ...


@dataclass
class SpecMetrics:
    """Counters of one generation (or a sum of several).

    drafts: steps that verified ≥ 1 draft; drafted / accepted: draft tokens
    proposed / kept; by_pos_drafted[i] / by_pos_accepted[i]: steps whose
    position i was proposed / accepted; steps: target passes after prefill;
    tokens: tokens emitted. A sibling (a draft tree's leaf) counts as accepted
    at its position when taken; siblings / sibling_hits: siblings verified /
    taken. time_*_ns: wall time inside the proposer's ``propose``, the
    target's ``score`` (model pass), and acceptance + rollback.
    """

    drafts: int = 0
    drafted: int = 0
    accepted: int = 0
    steps: int = 0
    tokens: int = 0
    siblings: int = 0
    sibling_hits: int = 0
    by_pos_drafted: list[int] = field(default_factory=list)
    by_pos_accepted: list[int] = field(default_factory=list)
    time_propose_ns: int = 0
    time_score_ns: int = 0
    time_verify_ns: int = 0

    def record(self, n_drafted: int, n_accepted: int) -> None:
        if n_drafted == 0:
            return
        self.drafts += 1
        self.drafted += n_drafted
        self.accepted += n_accepted
        grow = n_drafted - len(self.by_pos_drafted)
        if grow > 0:
            self.by_pos_drafted += [0] * grow
            self.by_pos_accepted += [0] * grow
        for i in range(n_drafted):
            self.by_pos_drafted[i] += 1
            self.by_pos_accepted[i] += int(i < n_accepted)

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def mean_accepted_len(self) -> float:
        """Tokens emitted per verifying pass: 1 + accepted / drafts."""
        return 1.0 + self.accepted / self.drafts if self.drafts else 1.0

    @property
    def accept_by_pos(self) -> list[float]:
        return [
            a / d if d else 0.0
            for a, d in zip(self.by_pos_accepted, self.by_pos_drafted, strict=True)
        ]

    def merge(self, o: SpecMetrics) -> None:
        counts = ("drafts", "drafted", "accepted", "steps", "tokens", "siblings", "sibling_hits")
        for name in counts:
            setattr(self, name, getattr(self, name) + getattr(o, name))
        for name in ("time_propose_ns", "time_score_ns", "time_verify_ns"):
            setattr(self, name, getattr(self, name) + getattr(o, name))
        n = max(len(self.by_pos_drafted), len(o.by_pos_drafted))
        pad = lambda xs: xs + [0] * (n - len(xs))  # noqa: E731
        self.by_pos_drafted = [
            a + b for a, b in zip(pad(self.by_pos_drafted), pad(o.by_pos_drafted), strict=True)
        ]
        self.by_pos_accepted = [
            a + b for a, b in zip(pad(self.by_pos_accepted), pad(o.by_pos_accepted), strict=True)
        ]

    def as_dict(self) -> dict[str, float | int | list[float]]:
        return {
            "drafts": self.drafts,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "steps": self.steps,
            "tokens": self.tokens,
            "siblings": self.siblings,
            "sibling_hits": self.sibling_hits,
            "acceptance_rate": round(self.acceptance_rate, 4),
            "mean_accepted_len": round(self.mean_accepted_len, 4),
            "accept_by_pos": [round(x, 4) for x in self.accept_by_pos],
            "time_propose_ms": round(self.time_propose_ns / 1e6, 3),
            "time_score_ms": round(self.time_score_ns / 1e6, 3),
            "time_verify_ms": round(self.time_verify_ns / 1e6, 3),
        }


class AdaptiveK:
    """Chooses K per step: +1 after a fully accepted step, -1 after a rejection.

    It also switches speculation off where it does not pay. Verifying K+1
    positions costs about ``verify_cost`` one-token decodes (memory-bound:
    the weights are read once), so a step pays when it accepts more than
    ``verify_cost - 1`` drafts. When a moving average of accepted drafts per
    step falls below that, speculation pauses for ``cooldown`` plain steps,
    then probes again. Counting tokens, not timing them, keeps the decision
    deterministic and immune to a busy machine.
    """

    def __init__(
        self,
        k: int,
        k_min: int = 1,
        k_max: int = 8,
        adaptive: bool = True,
        cooldown: int = 8,
        verify_cost: float = 1.5,
    ) -> None:
        self.k = max(k_min, min(k, k_max))
        self.k_min, self.k_max = k_min, k_max
        self.adaptive = adaptive
        self.cooldown = cooldown
        self.break_even = verify_cost - 1.0
        self.off_steps = 0
        self.accepted_ema: float | None = None

    def next_k(self) -> int:
        if self.off_steps > 0:
            self.off_steps -= 1
            return 0
        return self.k

    def update(self, n_drafted: int, n_accepted: int) -> None:
        if n_drafted == 0 or not self.adaptive:
            return
        if n_accepted == n_drafted:
            self.k = min(self.k_max, self.k + 1)
        else:
            self.k = max(self.k_min, self.k - 1)
        old = self.accepted_ema
        self.accepted_ema = n_accepted if old is None else 0.7 * old + 0.3 * n_accepted
        if self.accepted_ema < self.break_even:
            self.off_steps = self.cooldown
            self.accepted_ema = None  # judge afresh when probing again


class SpeculativeDecoder:
    """Generates with a target and an optional proposer; yields tokens step by step.

    Greedy sampling uses the greedy rule (output token-identical to plain
    greedy decoding); otherwise the exact rule (output distributed as the
    target's sampling distribution).
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
    ) -> None:
        self.target = target
        self.proposer = proposer
        self.sp = sampling or SamplingParams()
        self.rng = np.random.default_rng(self.sp.seed)
        self.k_init, self.adaptive, self.k_max = k, adaptive, k_max
        self.verify_cost = verify_cost  # AdaptiveK's pause threshold (see there)
        # > 0: each drafted token costs this many target decodes (a draft model),
        # and K is chosen by core.cost_k.CostAwareK instead of AdaptiveK.
        self.draft_cost = draft_cost
        self.clock = clock
        self.metrics = SpecMetrics()
        self._tree = bool(getattr(target, "tree", False))  # optional in the protocol

    def _pick(self, logits: np.ndarray) -> int:
        if self.sp.greedy:
            return int(logits.argmax())
        return draw(probs(logits, self.sp), float(self.rng.random()))

    def generate(
        self,
        prompt: list[int],
        max_new_tokens: int,
        stop_ids: set[int] | frozenset[int] = frozenset(),
    ) -> Iterator[list[int]]:
        """Yields the tokens each step emits (a stop token ends the stream, included)."""
        self.metrics = m = SpecMetrics()
        ctl: AdaptiveK | CostAwareK
        if self.draft_cost > 0 and self.adaptive:
            ctl = CostAwareK(self.draft_cost, k_max=self.k_max)
        else:
            ctl = AdaptiveK(
                self.k_init, k_max=self.k_max, adaptive=self.adaptive, verify_cost=self.verify_cost
            )
        if self.proposer is None or self.k_init <= 0:
            ctl.off_steps = 1 << 62
        clock = self.clock
        logits = self.target.prefill(prompt)
        last = self._pick(logits)
        seq = list(prompt) + [last]
        produced = m.tokens = 1
        yield [last]
        if last in stop_ids:
            return
        while produced < max_new_tokens:
            t0 = clock()
            k = min(ctl.next_k(), max_new_tokens - produced - 1)
            prop = Proposal(tokens=[])
            if k > 0 and self.proposer is not None:
                prop = self.proposer.propose(seq, k)
            t1 = clock()
            drafts = list(prop.tokens)
            base = self.target.length  # the cache holds seq[:-1]
            sibs = prop.siblings if drafts and self.sp.greedy and self._tree else ()
            if sibs:  # a tree: the chain, then each sibling after the row before its alternative
                parents = [-1, *range(len(drafts)), *(d for d, _ in sibs)]
                scores = self.target.score([last, *drafts, *(x for _, x in sibs)], parents)
            else:
                scores = self.target.score([last, *drafts])
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
                res = self._verify(drafts, prop, scores)
                n_acc = res.n_accepted
                out = [*drafts[:n_acc], res.next_token]  # res.emitted(drafts), without numpy
            self.target.rollback(base + 1 + n_acc)
            t3 = clock()
            for i, tok in enumerate(out):  # cut at a stop token
                if tok in stop_ids:
                    out = out[: i + 1]
                    break
            out = out[: max_new_tokens - produced]
            m.steps += 1
            m.record(len(drafts), n_acc)
            m.time_propose_ns += t1 - t0
            m.time_score_ns += t2 - t1
            m.time_verify_ns += t3 - t2
            ctl.update(len(drafts), n_acc)
            seq += out
            produced += len(out)
            m.tokens = produced
            last = out[-1]
            yield out
            if last in stop_ids:
                break

    def _verify(self, drafts: list[int], prop: Proposal, scores: Scores) -> accept.Accept:
        d = np.asarray(drafts, dtype=np.int64)
        logits = scores.logits
        if self.sp.greedy:
            return accept.greedy(d, logits, scores.best)
        q = probs(logits, self.sp)
        k = len(drafts)
        return accept.exact(d, prop.probs, q, self.rng.random(k), float(self.rng.random()))
