"""The LLM stage under an endpoint's control (stages/llm/context.py), with the real fast
model: replies on request, items added and removed, per-reply overrides, no reply of
its own when ``auto_reply`` is off."""

from __future__ import annotations

import asyncio

from tests.stages.llm.test_llm_stage import _end, _last_chunk, _reply, _run, _start
from voicepipe.frames import (
    ContextEdit,
    Respond,
    SessionSetup,
    TextDelta,
    TranscriptFinal,
)
from voicepipe.stages.llm.stage import LlmStage


async def test_respond_answers_the_items_added_and_the_conversation_keeps_them(cfg, engine) -> None:
    stage = LlmStage(cfg, engine.fork())
    q = {"role": "user", "content": "Which city is the capital of France?"}
    got = await _run(
        stage,
        [SessionSetup(auto_reply=False), ContextEdit(key="item_1", message=q), Respond(turn_id=3)],
        _last_chunk(3),
    )
    deltas, chunks = _reply(got, 3)
    assert "Paris" in deltas and chunks
    roles = [(m["role"], m["content"]) for m in stage.messages]
    assert roles[1] == ("user", q["content"])  # no second user message: Respond adds none
    assert [r for r, _ in roles] == ["system", "user", "assistant"]


async def test_auto_reply_off_a_final_transcript_starts_nothing(cfg, engine) -> None:
    stage = LlmStage(cfg, engine.fork())
    got, done, task = _start(stage, _last_chunk(2))
    await stage.put(SessionSetup(auto_reply=False))
    await stage.put(TranscriptFinal(turn_id=1, text="Hello there."))
    await stage.put(ContextEdit(key="x", message={"role": "user", "content": "Say hi."}))
    await stage.put(Respond(turn_id=2))
    await asyncio.wait_for(done.wait(), 300)
    await _end(stage, task)
    assert not [f for f in got if isinstance(f, TextDelta) and f.turn_id == 1]
    assert any(isinstance(f, TranscriptFinal) for f in got)  # pushed on, for the client
    assert [m["content"] for m in stage.messages if m["role"] == "user"] == ["Say hi."]


async def test_an_item_removed_leaves_the_conversation_and_overrides_last_one_reply(
    cfg, engine
) -> None:
    stage = LlmStage(cfg, engine.fork())
    got, done, task = _start(stage, _last_chunk(1))
    await stage.put(SessionSetup(auto_reply=False, max_new_tokens=5))
    await stage.put(ContextEdit(key="a", message={"role": "user", "content": "Name a fruit."}))
    await stage.put(
        ContextEdit(key="b", message={"role": "user", "content": "Count from one to twenty."})
    )
    await stage.put(ContextEdit(key="a"))  # removed again
    await stage.put(Respond(turn_id=1, instructions="Answer in French."))
    await asyncio.wait_for(done.wait(), 300)
    await _end(stage, task)
    users = [m["content"] for m in stage.messages if m["role"] == "user"]
    assert users == ["Count from one to twenty."]
    assert stage.messages[0]["content"] == cfg.llm.system_prompt  # the override is gone
    assert stage.conversation.max_new_tokens == 5
    metrics = [f for f in got if f.__class__.__name__ == "MetricsFrame" and f.turn_id == 1]
    assert metrics and metrics[0].values["tokens"] <= 5 + 1  # (+ the stop token); unbounded: ~40
