"""Tools in the LLM stage with the real Qwen2.5-Coder-1.5B (its GGUF's chat template).

Needs `voicepipe models pull qwen2.5-coder-1.5b`; loading it and a few replies take
about a minute on two cores, so these run with `pytest -m slow`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from voicepipe import config
from voicepipe.frames import Alert, End, Frame, SpanFrame, TextChunk, TextDelta, TranscriptFinal
from voicepipe.stage import TurnCounter
from voicepipe.stages.llm.engine import engine_for, system_prefix
from voicepipe.stages.llm.stage import LlmStage

pytestmark = pytest.mark.slow
MODEL = "qwen2.5-coder-1.5b"


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    return config.load(None, [f"llm.model={MODEL}", "llm.drafter=ngram", "llm.max_new_tokens=80"])


@pytest.fixture(scope="module")
def engine(cfg):
    return engine_for(cfg)


def test_the_gguf_template_renders_the_tools_and_the_prefix_cache_holds_them(cfg, engine):
    stage = LlmStage(cfg, engine.fork())
    assert stage.tools is not None and engine.tokenizer.supports_tools
    assert stage.messages[0]["content"] == cfg.tools.system_prompt
    specs = stage.tools.specs()
    text = engine.tokenizer.render(
        [*stage.messages, {"role": "user", "content": "Hi."}], tools=specs
    )
    # The template's own tools block, one JSON schema per line, in the system turn.
    head, _, rest = text.partition("<tools>\n")
    assert head.startswith("<|im_start|>system\n" + cfg.tools.system_prompt)
    block = rest.split("\n</tools>", 1)[0].split("\n")
    assert [json.loads(line)["function"]["name"] for line in block] == [
        "set_timer", "get_current_time", "calculate",
    ]  # fmt: skip
    # Every session's prompt starts with the system prefix, tools included, so the
    # process-wide prefix cache serves it.
    prefix = system_prefix(engine.tokenizer, stage.messages[0]["content"], specs)
    assert engine.tokenizer.decode(prefix, skip_special=False).count('"name": "calculate"') == 1
    assert stage.backend.prompt("Set a timer for ten minutes.")[: len(prefix)] == prefix


async def _turn(stage: LlmStage, text: str) -> list[Frame]:
    got: list[Frame] = []

    async def sink(f: Frame) -> None:
        got.append(f)

    stage.push = sink
    await stage.reply(1, text)
    return got


async def test_a_timer_request_calls_set_timer_and_speaks_no_json(cfg, engine):
    stage = LlmStage(cfg, engine.fork())
    got = await _turn(stage, "Set a timer for ten minutes.")
    await stage.stop()
    spans = [f for f in got if isinstance(f, SpanFrame)]
    (tool,) = [s for s in spans if s.name == "llm.tool"]
    (call,) = tool.attrs["calls"]
    assert call["name"] == "set_timer" and call["ok"]
    assert json.loads(call["result"])["duration"] == "10 minutes"
    ttft = next(s for s in spans if s.name == "llm.ttft")
    assert ttft.attrs["shared"] > 0  # the tools block came from the prefix cache
    spoken = " ".join(f.text for f in got if isinstance(f, TextChunk))
    shown = "".join(f.text for f in got if isinstance(f, TextDelta))
    for text in (spoken, shown):
        assert text.strip() and "{" not in text and "tool_call" not in text, text
    # The built-in says its result itself: no second model round.
    assert tool.attrs["spoken"] and spoken == "Your 10 minute timer is set."
    # The conversation keeps the call and its result for the next turn.
    roles = [m["role"] for m in stage.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert stage.messages[2]["tool_calls"][0]["function"]["name"] == "set_timer"
    assert stage.messages[-1]["content"] == "Your 10 minute timer is set."


async def test_with_spoken_results_off_the_model_says_the_result(cfg, engine):
    off = dataclasses.replace(cfg, tools=dataclasses.replace(cfg.tools, speak_results=False))
    stage = LlmStage(off, engine.fork())
    got = await _turn(stage, "What is 12 times 15?")
    await stage.stop()
    (tool,) = [f for f in got if isinstance(f, SpanFrame) and f.name == "llm.tool"]
    assert not tool.attrs["spoken"] and tool.attrs["calls"][0]["name"] == "calculate"
    spoken = " ".join(f.text for f in got if isinstance(f, TextChunk))
    assert "180" in spoken and spoken != "12 times 15 is 180."


async def test_empty_call_tags_are_decoded_again_from_a_calls_opening(cfg, engine):
    # For this request the 1.5B writes "<tools></tools>" (a call with nothing in it);
    # the stage starts it again on "<tool_call>\n{"name": "" and it names the tool.
    stage = LlmStage(cfg, engine.fork())
    got = await _turn(stage, "Let me know when fifteen minutes are up.")
    await stage.stop()
    (tool,) = [f for f in got if isinstance(f, SpanFrame) and f.name == "llm.tool"]
    assert [(c["name"], c["ok"]) for c in tool.attrs["calls"]] == [("set_timer", True)]
    assert json.loads(tool.attrs["calls"][0]["result"])["duration"] == "15 minutes"
    spoken = " ".join(f.text for f in got if isinstance(f, TextChunk))
    assert spoken.strip() and "<" not in spoken and "{" not in spoken, spoken


async def test_a_timer_that_ends_is_announced_and_spoken_as_its_own_turn(cfg, engine):
    turns = TurnCounter()
    stage = LlmStage(cfg, engine.fork(), turns=turns)
    got: list[Frame] = []
    alerted = asyncio.Event()

    async def sink(f: Frame) -> None:
        got.append(f)
        if isinstance(f, TextChunk) and f.turn_id == 2 and f.last:
            alerted.set()

    stage.push = sink
    task = asyncio.create_task(stage.run())
    turns.next()  # the ASR gave the question turn 1
    await stage.put(TranscriptFinal(turn_id=1, text="Please set a timer for three seconds."))
    await asyncio.wait_for(alerted.wait(), 300)
    await stage.put(End())
    await asyncio.wait_for(task, 60)
    (alert,) = [f for f in got if isinstance(f, Alert)]
    assert alert.kind == "timer" and alert.turn_id == 2 and alert.data["seconds"] == 3
    chunks = [f for f in got if isinstance(f, TextChunk) and f.turn_id == 2]
    assert [c.text for c in chunks] == [alert.text] and "3 second timer" in alert.text
    assert got.index(alert) < got.index(chunks[0])  # the event first, then the words
    # The reply to the question ended before the alert's turn began.
    first_last = next(f for f in got if isinstance(f, TextChunk) and f.turn_id == 1 and f.last)
    assert got.index(first_last) < got.index(alert)


async def test_tools_off_by_config_render_no_tools(cfg, engine):
    off = dataclasses.replace(cfg, tools=dataclasses.replace(cfg.tools, enabled=False))
    stage = LlmStage(off, engine.fork())
    assert stage.tools is None
    assert stage.messages[0]["content"] == cfg.llm.system_prompt
    assert "<tools>" not in engine.tokenizer.decode(stage.backend.prompt("Hi."), skip_special=False)


async def test_a_reply_reciting_its_tools_is_answered_again_without_them(cfg, engine):
    """Asked what to do after a mishap, the 1.5B with tools began "Call getcurrenttime to
    determine the time…" (the development set of bench answers): nothing of that is said
    or shown; the reply is decoded again without tools and gives advice."""
    ask = "I spilled hot coffee on my hand. What should I do?"
    stage = LlmStage(cfg, engine.fork())
    got = await _turn(stage, ask)
    await stage.stop()
    (recital,) = [f for f in got if isinstance(f, SpanFrame) and f.name == "llm.recital"]
    assert "get_current_time" in recital.attrs["tools"]
    spoken = " ".join(f.text for f in got if isinstance(f, TextChunk))
    shown = "".join(f.text for f in got if isinstance(f, TextDelta))
    for text in (spoken, shown):
        low = text.lower().replace("_", "")
        assert "water" in low and "getcurrenttime" not in low and "settimer" not in low, text
    # the conversation holds the question and the answer said, nothing of the recital
    assert [m["role"] for m in stage.messages[-2:]] == ["user", "assistant"]
    assert stage.messages[-1]["content"] == shown.strip()
    # with the guard off the same question recites (what the guard is for)
    off = dataclasses.replace(cfg, tools=dataclasses.replace(cfg.tools, recital_guard=False))
    stage = LlmStage(off, engine.fork())
    got = await _turn(stage, ask)
    await stage.stop()
    shown = "".join(f.text for f in got if isinstance(f, TextDelta)).lower()
    assert "getcurrenttime" in shown.replace("_", ""), shown
