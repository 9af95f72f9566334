"""The LLM stage's jump-forward decoding of tool calls (stages/llm/tools.jump_forcer,
speculative/jump.py, core/jump.py)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from tests.speculative.test_jump import SPECS, Tok
from voicepipe.speculative.jump import JumpProposer
from voicepipe.stages.llm.tools import jump_forcer


def test_forcers_follow_the_tools_and_mode_and_are_shared_between_sessions() -> None:
    tok = Tok()
    a, b = SimpleNamespace(tokenizer=tok), SimpleNamespace(tokenizer=tok)
    fa, fb = jump_forcer(a, SPECS, "certain"), jump_forcer(b, list(SPECS), "certain")
    assert isinstance(fa, JumpProposer) and fa is fb and fa.certain
    verify = jump_forcer(a, SPECS, "verify")
    assert isinstance(verify, JumpProposer) and not verify.certain
    assert jump_forcer(a, SPECS[:1], "certain") is not fa  # a response's own tools
    assert jump_forcer(a, SPECS, "off") is None
    assert jump_forcer(a, None, "certain") is None  # tools off
    assert jump_forcer(SimpleNamespace(), SPECS, "certain") is None  # a remote model
    # a tool the grammar cannot force: the call is decoded, the reply goes on
    assert jump_forcer(a, [{"name": 'say "x"', "parameters": {}}], "certain") is None


def test_a_bad_mode_is_a_config_error() -> None:
    from voicepipe import config

    with pytest.raises(config.ConfigError, match="tool_jump"):
        config.load(None, ["--llm.tool_jump=sometimes"])


@pytest.mark.slow
async def test_the_15b_makes_the_same_calls_in_fewer_passes() -> None:
    """The default LLM and drafter: a timer, the clock and the calculator with forcing off
    and on: the same calls and spoken replies, fewer target passes, tokens forced."""
    from voicepipe import config
    from voicepipe.frames import SpanFrame, TextChunk
    from voicepipe.stages.llm.engine import engine_for
    from voicepipe.stages.llm.stage import LlmStage

    cfg = config.load(None)
    base = engine_for(cfg)
    for ask in ("Set a timer for ten minutes.", "What time is it?", "What is 17 times 23?"):
        got = {}
        for mode in ("off", "certain"):
            c = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, tool_jump=mode))
            stage = LlmStage(c, base.fork())
            said: list[str] = []
            tool: list[dict] = []

            async def sink(f: object, said: list[str] = said, tool: list[dict] = tool) -> None:
                if isinstance(f, TextChunk):
                    said.append(f.text)
                if isinstance(f, SpanFrame) and f.name == "llm.tool":
                    tool.append(dict(f.attrs))

            stage.push = sink  # type: ignore[method-assign]
            await stage.reply(1, ask)
            await stage.stop()
            got[mode] = (said, tool)
        (said_off, tool_off), (said_on, tool_on) = got["off"], got["certain"]
        assert tool_off and tool_on, ask
        assert [c["name"] for c in tool_on[0]["calls"]] == [c["name"] for c in tool_off[0]["calls"]]
        assert [c["arguments"] for c in tool_on[0]["calls"]] == [
            c["arguments"] for c in tool_off[0]["calls"]
        ]
        if "time" not in ask:  # (the clock's answer reads the clock)
            assert said_on == said_off, ask
        assert tool_on[0]["forced_tokens"] > 0 and tool_off[0]["forced_tokens"] == 0
        assert tool_on[0]["passes"] <= tool_off[0]["passes"], ask
