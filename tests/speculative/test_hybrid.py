"""Prompt lookup in front of a drafting model (spec.hybrid) on toy Markov chains."""

from __future__ import annotations

from tests.speculative.test_loop import MarkovProposer, MarkovTarget, _chains, _plain_greedy
from voicepipe.speculative.adaptive import CostAwareK
from voicepipe.speculative.hybrid import HybridProposer
from voicepipe.speculative.loop import SpeculativeDecoder
from voicepipe.speculative.ngram import NgramProposer
from voicepipe.speculative.sampling import SamplingParams
from voicepipe.speculative.types import Proposal


class Fixed:
    """Proposes the same tokens whatever the context; counts its calls."""

    name = "fixed"

    def __init__(self, tokens: list[int]) -> None:
        self.tokens, self.calls = tokens, 0

    def reset(self) -> None:
        pass

    def propose(self, context: list[int], k: int) -> Proposal:
        self.calls += 1
        return Proposal(tokens=self.tokens[:k])


class Spy(CostAwareK):
    def __init__(self, k: int) -> None:
        super().__init__(draft_cost=0.3)
        self.k, self.told = k, []

    def next_k(self) -> int:
        return self.k

    def update(self, n_drafted: int, n_accepted: int) -> None:
        self.told.append((n_drafted, n_accepted))


def test_lookup_first_model_otherwise_capped() -> None:
    draft = Fixed([7, 8, 9, 10])
    h = HybridProposer(NgramProposer(min_n=2), draft, draft_k=2)
    assert h.name == "ngram+fixed"
    # "1 2" occurred before, followed by "3 4": lookup proposes (capped by its order, 2).
    assert h.propose([1, 2, 3, 4, 5, 1, 2], 6).tokens == [3, 4]
    assert (h.used_ngram, draft.calls) == (1, 0)
    # No 2-token match: the model, at most draft_k tokens.
    assert h.propose([11, 12, 13], 6).tokens == [7, 8]
    assert draft.calls == 1


def test_the_model_learns_from_what_the_next_context_kept() -> None:
    ctl = Spy(3)
    h = HybridProposer(NgramProposer(min_n=2), Fixed([7, 8, 9]), draft_ctl=ctl)
    ctx = [11, 12, 13]
    assert h.propose(ctx, 5).tokens == [7, 8, 9]  # K from draft_ctl (3), not the decoder's 5
    # The target kept 7 and corrected 8 to 5: one of three accepted.
    h.propose([*ctx, 7, 5], 5)
    assert ctl.told == [(3, 1)]
    # All kept (+ the target's bonus token).
    h.propose([*ctx, 7, 5, 7, 8, 9, 4], 5)
    assert ctl.told[-1] == (3, 3)
    # A lookup pass is not the model's: nothing learnt from it.
    n = len(ctl.told)
    assert h.propose([1, 2, 3, 1, 2], 5).tokens == [3, 1]  # and another conversation
    h.propose([1, 2, 3, 1, 2, 3, 6], 5)
    assert len(ctl.told) == n


def test_a_paused_model_is_not_asked() -> None:
    draft = Fixed([7])
    h = HybridProposer(NgramProposer(min_n=2), draft, draft_ctl=Spy(0))
    assert h.propose([11, 12, 13], 4).tokens == []
    assert draft.calls == 0
    assert h.propose([1, 2, 3, 1, 2], 4).tokens == [3, 1]  # lookups go on


def test_greedy_speculation_through_the_hybrid_is_token_identical() -> None:
    P, Q = _chains(7)
    want = _plain_greedy(Q, [0, 3], 60)
    calls = {}
    for cost in (0.05, 1.0):  # 1.0: a model step costs a target step and never pays
        model = MarkovProposer(P, 1, greedy=True)
        n_calls = [0]
        inner = model.propose

        def counted(ctx: list[int], k: int, inner=inner, n_calls=n_calls) -> Proposal:
            n_calls[0] += 1
            return inner(ctx, k)

        model.propose = counted
        ctl = CostAwareK(cost, k_max=6)
        h = HybridProposer(NgramProposer(min_n=2), model, draft_ctl=ctl)
        target = MarkovTarget(Q)
        dec = SpeculativeDecoder(target, h, SamplingParams(), k=4, k_max=6, verify_cost=1.0)
        got = [t for step in dec.generate([0, 3], 60) for t in step]
        assert got == want, cost
        assert target.fed == [0, 3, *got][: target.length]
        calls[cost] = (n_calls[0], dec.metrics.steps, h.used_ngram)
    cheap, dear = calls[0.05], calls[1.0]
    assert cheap[0] + cheap[2] == cheap[1]  # every pass drafted, by lookup or the model
    assert 0 < dear[0] <= dear[1] // 8 + 1  # one probe, then CostAwareK's cooldown
