"""The speculation loop on toy Markov-chain models: bookkeeping, metrics, fidelity."""

from __future__ import annotations

import numpy as np

from tests.speculative.test_accept import chi2, chi2_critical
from voicepipe.speculative.adaptive import AdaptiveK
from voicepipe.speculative.loop import SpeculativeDecoder
from voicepipe.speculative.metrics import SpecMetrics
from voicepipe.speculative.ngram import NgramProposer
from voicepipe.speculative.sampling import SamplingParams
from voicepipe.speculative.types import Proposal, Scores


class MarkovTarget:
    """A 'model' whose next-token logits depend on the previous token only."""

    def __init__(self, Q: np.ndarray) -> None:
        self.logQ = np.log(Q)
        self.fed: list[int] = []
        self.scored = 0

    @property
    def length(self) -> int:
        return len(self.fed)

    def prefill(self, tokens: list[int]) -> np.ndarray:
        self.fed = list(tokens)
        return self.logQ[tokens[-1]]

    def score(self, tokens: list[int]) -> Scores:
        self.fed += tokens
        self.scored += 1
        return Scores(np.stack([self.logQ[t] for t in tokens]))

    def rollback(self, length: int) -> None:
        assert 0 <= length <= len(self.fed)
        del self.fed[length:]


class MarkovProposer:
    name = "markov"

    def __init__(self, P: np.ndarray, seed: int, greedy: bool = False) -> None:
        self.P, self.rng, self.greedy = P, np.random.default_rng(seed), greedy

    def reset(self) -> None:
        pass

    def propose(self, context: list[int], k: int) -> Proposal:
        prev, toks, rows = context[-1], [], []
        for _ in range(k):
            rows.append(self.P[prev])
            if self.greedy:
                prev = int(self.P[prev].argmax())
            else:
                prev = int(self.rng.choice(len(self.P), p=self.P[prev]))
            toks.append(prev)
        return Proposal(toks, None if self.greedy else np.stack(rows))


def _chains(v: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    Q = rng.dirichlet(np.ones(v) * 0.7, size=v)
    P = 0.5 * rng.dirichlet(np.ones(v), size=v) + 0.5 * Q
    return P, Q


def _plain_greedy(Q: np.ndarray, start: list[int], n: int) -> list[int]:
    seq = list(start)
    for _ in range(n):
        seq.append(int(Q[seq[-1]].argmax()))
    return seq[len(start) :]


def test_greedy_speculation_is_token_identical() -> None:
    P, Q = _chains(7)
    want = _plain_greedy(Q, [0, 3], 40)
    for k in (1, 2, 3, 5):
        for adaptive in (False, True):
            for prop in (MarkovProposer(P, 1, greedy=True), NgramProposer()):
                target = MarkovTarget(Q)
                dec = SpeculativeDecoder(target, prop, SamplingParams(), k=k, adaptive=adaptive)
                got = [t for step in dec.generate([0, 3], 40) for t in step]
                assert got == want, (k, adaptive, prop.name)
                # The target's cache never keeps a rejected draft.
                assert target.fed == [0, 3, *got][: target.length]
                assert dec.metrics.tokens == 40
                assert dec.metrics.steps == target.scored


def test_stop_token_and_budget() -> None:
    P, Q = _chains(7)
    want = _plain_greedy(Q, [0], 30)
    stop = want[5]
    dec = SpeculativeDecoder(MarkovTarget(Q), NgramProposer(), SamplingParams(), k=4)
    got = [t for step in dec.generate([0], 30, {stop}) for t in step]
    assert got == want[: want.index(stop) + 1]
    dec = SpeculativeDecoder(MarkovTarget(Q), MarkovProposer(P, 0, True), SamplingParams(), k=4)
    assert len([t for s in dec.generate([0], 7) for t in s]) == 7


def test_sampled_speculation_reproduces_target_distribution() -> None:
    """Whole loop (propose, score, exact rule, rollback) at temperature 1 vs the target chain."""
    P, Q = _chains(5)
    counts = np.zeros((5, 5))
    n = 4000
    for seed in range(n):
        target = MarkovTarget(Q)
        sp = SamplingParams(temperature=1.0, seed=seed)
        dec = SpeculativeDecoder(target, MarkovProposer(P, seed + 10**6), sp, k=3, adaptive=False)
        toks = [t for s in dec.generate([0], 3) for t in s]
        counts[toks[1], toks[2]] += 1  # tokens 2 and 3: produced by speculative steps
    Q2 = Q @ Q  # law of token 2 given start 0 and one intermediate token
    target_law = Q2[0][:, None] * Q
    stat, dof = chi2(counts.ravel(), target_law.ravel())
    assert stat < chi2_critical(dof), (stat, dof)


def test_metrics_by_position_and_merge() -> None:
    m = SpecMetrics()
    m.record(4, 2)
    m.record(2, 2)
    m.record(0, 0)  # a plain step is not a draft
    assert (m.drafts, m.drafted, m.accepted) == (2, 6, 4)
    assert m.accept_by_pos == [1.0, 1.0, 0.0, 0.0]
    assert m.mean_accepted_len == 3.0
    o = SpecMetrics()
    o.record(5, 5)
    m.merge(o)
    assert m.by_pos_drafted == [3, 3, 2, 2, 1]
    assert m.by_pos_accepted == [3, 3, 1, 1, 1]
    assert m.as_dict()["acceptance_rate"] == round(9 / 11, 4)


def test_adaptive_k_grows_shrinks_and_switches_off() -> None:
    c = AdaptiveK(4, k_max=6, cooldown=3, pause_below=0.5)
    c.update(4, 4)
    assert c.next_k() == 5
    c.update(5, 1)  # accepted average 0.7·4 + 0.3·1 = 3.1: keeps speculating, shorter
    assert c.next_k() == 4
    c.update(0, 0)  # a step without drafts changes nothing
    assert c.next_k() == 4
    off = AdaptiveK(2, cooldown=3, pause_below=0.5)
    off.update(2, 0)  # nothing accepted: below break-even (0.5), pause 3 steps, then probe
    assert [off.next_k() for _ in range(4)] == [0, 0, 0, 1]
    fixed = AdaptiveK(4, adaptive=False)
    fixed.update(4, 0)
    assert fixed.next_k() == 4


def test_ngram_proposer_lookup() -> None:
    p = NgramProposer(max_n=3, min_n=1)
    ctx = [1, 2, 3, 4, 5, 9, 1, 2, 3]
    assert p.propose(ctx, 3).tokens == [4, 5, 9]
    ctx += [4, 7, 7]
    assert p.propose(ctx, 2).tokens == [7]  # most recent "7" is followed by "7", then nothing
    assert p.propose([8, 8, 6], 2).tokens == []  # a different context is re-indexed
    assert NgramProposer(min_n=2).propose([5, 1, 2, 5], 2).tokens == []  # 1-grams off


def test_ngram_proposal_is_capped_by_the_order_it_matched() -> None:
    ctx = [1, 2, 3, 4, 5, 6, 7, 8, 0, 9, 2]  # suffix "2" matches a 1-gram only
    assert NgramProposer().propose(ctx, 8).tokens == [3]
    ctx = [1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3]  # "1 2 3": a 3-gram
    assert NgramProposer().propose(ctx, 8).tokens == [4, 5, 6]
    assert NgramProposer().propose(ctx, 2).tokens == [4, 5]  # and by k
    assert NgramProposer(max_n=2).propose(ctx, 8).tokens == [4, 5]  # by max_n through the order


class PairTarget:
    """Next-token logits depend on the last two tokens; scores trees of rows."""

    tree = True

    def __init__(self, Q2: np.ndarray) -> None:
        self.logQ = np.log(Q2)  # (V, V, V): [a, b] → next after ... a, b
        self.fed: list[int] = []

    @property
    def length(self) -> int:
        return len(self.fed)

    def prefill(self, tokens: list[int]) -> np.ndarray:
        self.fed = list(tokens)
        return self.logQ[tokens[-2], tokens[-1]]

    def score(self, tokens: list[int], parents: list[int] | None = None) -> Scores:
        parents = parents or [-1, *range(len(tokens) - 1)]
        prev = [tokens[p] if p >= 0 else self.fed[-1] for p in parents]  # each row's parent
        self.fed += tokens
        return Scores(np.stack([self.logQ[a, b] for a, b in zip(prev, tokens, strict=True)]))

    def rollback(self, length: int) -> None:
        del self.fed[length:]

    def move(self, src: int, dst: int) -> None:
        self.fed[dst] = self.fed[src]


class RunnerUpProposer:
    """Greedy drafts from an order-1 chain, each with its runner-up as a sibling."""

    name = "runner-up"

    def __init__(self, P: np.ndarray) -> None:
        self.P = P

    def reset(self) -> None:
        pass

    def propose(self, context: list[int], k: int) -> Proposal:
        prev, toks, sibs = context[-1], [], []
        for d in range(k):
            order = np.argsort(-self.P[prev], kind="stable")
            toks.append(int(order[0]))
            sibs.append((d, int(order[1])))
            prev = toks[-1]
        return Proposal(toks, siblings=tuple(sibs))


def test_greedy_speculation_with_sibling_leaves_is_token_identical() -> None:
    v = 8
    rng = np.random.default_rng(7)  # a chain whose runner-ups hold at depths 0 and 1
    Q2 = rng.dirichlet(np.ones(v) * 0.6, size=(v, v))
    P = Q2.mean(axis=0)  # a draft that cannot see the token before last
    seq = [0, 4]
    for _ in range(60):
        seq.append(int(Q2[seq[-2], seq[-1]].argmax()))
    for k in (1, 2, 3):
        target = PairTarget(Q2)
        prop = RunnerUpProposer(P)
        dec = SpeculativeDecoder(target, prop, SamplingParams(), k=k, adaptive=False)
        got = [t for step in dec.generate([0, 4], 60) for t in step]
        assert got == seq[2:], k
        # Only the emitted path stays, the taken siblings moved to their positions.
        assert target.fed == seq[: target.length]
        m = dec.metrics
        assert m.siblings == m.drafted  # one per guess
        assert 0 < m.sibling_hits < m.steps
        assert m.tokens == 60


def test_sampled_speculation_ignores_siblings() -> None:
    v = 5
    Q2 = np.random.default_rng(4).dirichlet(np.ones(v), size=(v, v))
    target = PairTarget(Q2)
    sp = SamplingParams(temperature=1.0, seed=1)
    dec = SpeculativeDecoder(target, RunnerUpProposer(Q2.mean(axis=0)), sp, k=2)
    out = [t for step in dec.generate([0, 1], 20) for t in step]
    assert len(out) == 20 and dec.metrics.siblings == 0


def test_metrics_count_passes_by_accepted_draft_tokens() -> None:
    a, b = SpecMetrics(), SpecMetrics()
    for drafted, accepted in ((3, 0), (3, 3), (0, 0), (2, 1)):
        a.record(drafted, accepted)
    b.record(4, 4)
    a.merge(b)
    assert a.accept_hist == [2, 1, 0, 1, 1]  # the undrafted pass counts in 0
    assert a.as_dict()["accept_hist"] == [2, 1, 0, 1, 1]
    assert a.drafts == 4
