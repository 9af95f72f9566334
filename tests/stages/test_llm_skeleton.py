"""The LLM stage's tool-call skeletons (stages/llm_tools.use_skeletons, spec/skeleton.py)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.spec.test_hybrid import Fixed
from tests.spec.test_skeleton import SPECS, ToyTokenizer
from voicepipe.spec.hybrid import HybridProposer
from voicepipe.spec.ngram import NgramProposer
from voicepipe.stages.llm_tools import use_skeletons


def _engine(proposer: object) -> SimpleNamespace:
    return SimpleNamespace(proposer=proposer, tokenizer=ToyTokenizer())


def test_skeletons_follow_the_tools_and_are_shared_between_sessions() -> None:
    a, b = (_engine(HybridProposer(NgramProposer(), Fixed([1]))) for _ in range(2))
    b.tokenizer = a.tokenizer  # two sessions of one model
    use_skeletons(a, SPECS)
    use_skeletons(b, list(SPECS))
    assert a.proposer.skeleton is not None and a.proposer.skeleton is b.proposer.skeleton
    use_skeletons(a, SPECS[:1])  # a response's own tools
    assert a.proposer.skeleton is not b.proposer.skeleton
    use_skeletons(a, None)  # tools off
    assert a.proposer.skeleton is None


def test_only_a_hybrid_drafter_gets_them_and_a_bad_schema_costs_only_the_drafts() -> None:
    plain = _engine(NgramProposer())
    use_skeletons(plain, SPECS)
    assert not hasattr(plain.proposer, "skeleton")
    eng = _engine(HybridProposer(NgramProposer(), Fixed([1])))
    use_skeletons(eng, [{"type": "function", "function": {"parameters": {}}}])  # no name
    assert eng.proposer.skeleton is None
