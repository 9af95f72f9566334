"""The LLM stage's tool-call skeletons (stages/llm_tools.use_skeletons, speculative/skeleton.py)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from tests.speculative.test_hybrid import Fixed
from tests.speculative.test_skeleton import SPECS, ToyTokenizer
from voicepipe.speculative.hybrid import HybridProposer
from voicepipe.speculative.ngram import NgramProposer
from voicepipe.stages.llm.tools import use_skeletons


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


def test_a_replys_metrics_count_every_pass_of_its_tool_rounds() -> None:
    from voicepipe.speculative.metrics import SpecMetrics
    from voicepipe.stages.llm.local import all_passes

    call, answer = SpecMetrics(target_passes=8, tokens=21), SpecMetrics(target_passes=10)
    m = all_passes([SimpleNamespace(metrics=call), SimpleNamespace(metrics=answer)])
    assert (m["target_passes"], m["tokens"]) == (18, 21)
    # A decoder with other metrics (a test's, a remote model's): its own, as before.
    other = SimpleNamespace(as_dict=lambda: {"x": 1})
    assert all_passes([SimpleNamespace(metrics=call), SimpleNamespace(metrics=other)]) == {"x": 1}


@pytest.mark.slow
async def test_the_15b_writes_the_same_call_in_fewer_passes() -> None:
    """The default LLM (Qwen2.5-Coder-1.5B) with its draft behind prompt lookup, the
    hybrid drafter skeletons ride in front of (the default decodes plainly, without
    them), tool calls decoded without jump-forward: the calculator turn with and
    without skeletons, token for token the same reply."""
    from voicepipe import config
    from voicepipe.frames import TextChunk
    from voicepipe.stages.llm.engine import engine_for
    from voicepipe.stages.llm.stage import LlmStage

    # (jump-forward off: it forces the fixed text the skeletons would draft, test_llm_jump)
    cfg = config.load(None, ["--llm.tool_jump=off", "--llm.drafter=ngram+qwen2.5-coder-1.5b-draft"])
    off = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, tool_skeleton=False))
    base = engine_for(cfg)
    got = {}
    for c in (off, cfg):
        stage = LlmStage(c, base.fork())
        said: list[str] = []

        async def sink(f: object, said: list[str] = said) -> None:
            if isinstance(f, TextChunk):
                said.append(f.text)

        stage.push = sink  # type: ignore[method-assign]
        await stage.reply(1, "What is two plus three?")
        await stage.stop()
        got[c.llm.tool_skeleton] = (said, stage.last_metrics, stage.engine.proposer)
    assert got[True][0] == got[False][0] and "5" in " ".join(got[True][0])
    assert got[True][2].used_skeleton > 0 and got[True][1]["tool_rounds"] == 1
    # Fewer passes with them. (How many fewer depends on the draft: the 2026-11-25 one
    # took 13 passes without skeletons and 8 with; the 2026-11-28 one, trained on replies
    # to a served prompt with the tools block, drafts most of the call's JSON itself: 8
    # and 7.)
    assert got[True][1]["target_passes"] < got[False][1]["target_passes"]
