"""LLM stage with the real default model: streaming, chunks, memory, interrupt."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from voicepipe.config import Config
from voicepipe.frames import (
    End,
    Frame,
    Interrupt,
    MetricsFrame,
    SpanFrame,
    TextChunk,
    TextDelta,
    TranscriptFinal,
)
from voicepipe.stages.llm import LlmStage, engine_for


@pytest.fixture(scope="module")
def cfg() -> Config:
    c = Config()
    return dataclasses.replace(c, llm=dataclasses.replace(c.llm, max_new_tokens=40))


@pytest.fixture(scope="module")
def engine(cfg):
    return engine_for(cfg)


async def _run(stage: LlmStage, frames: list[Frame], until) -> list[Frame]:
    got: list[Frame] = []
    done = asyncio.Event()

    async def sink(f: Frame) -> None:
        got.append(f)
        if until(f, got):
            done.set()

    stage.push = sink
    task = asyncio.create_task(stage.run())
    for f in frames:
        await stage.put(f)
    await asyncio.wait_for(done.wait(), 300)
    await stage.put(End())
    await asyncio.wait_for(task, 300)
    return got


async def test_streams_deltas_chunks_spans_and_remembers(cfg, engine) -> None:
    stage = LlmStage(cfg, engine.fork())
    last = lambda f, got: isinstance(f, TextChunk) and f.last and f.turn_id == 2  # noqa: E731
    got = await _run(
        stage,
        [
            TranscriptFinal(turn_id=1, text="Hi! What is the capital of France?"),
            TranscriptFinal(turn_id=2, text="And of Italy?"),
        ],
        last,
    )
    for turn in (1, 2):
        deltas = "".join(f.text for f in got if isinstance(f, TextDelta) and f.turn_id == turn)
        chunks = [f for f in got if isinstance(f, TextChunk) and f.turn_id == turn]
        assert deltas.strip() and chunks[-1].last and not any(c.last for c in chunks[:-1])
        assert " ".join(c.text for c in chunks if c.text).split() == deltas.split()
        names = [f.name for f in got if isinstance(f, SpanFrame) and f.turn_id == turn]
        assert "llm.ttft" in names and "llm.first_chunk" in names
        metrics = [f for f in got if isinstance(f, MetricsFrame) and f.turn_id == turn]
        assert metrics and metrics[0].values["tokens"] > 1
        (tpot,) = [f for f in got if isinstance(f, SpanFrame) and f.name == "llm.tpot"
                   and f.turn_id == turn]
        assert tpot.attrs["tokens"] == metrics[0].values["tokens"]
        assert tpot.duration_ms == pytest.approx(metrics[0].values["tpot_ms"], abs=0.01)
    assert "Paris" in "".join(f.text for f in got if isinstance(f, TextDelta) and f.turn_id == 1)
    roles = [m["role"] for m in stage.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert stage.messages[0]["content"] == cfg.llm.system_prompt


async def test_interrupt_stops_generation_at_once(cfg, engine) -> None:
    stage = LlmStage(cfg, engine.fork())
    sent = {"interrupt": False}

    first_delta = asyncio.Event()

    async def interrupt_after_first_delta() -> None:
        await first_delta.wait()
        sent["interrupt"] = True
        await stage.put(Interrupt(turn_id=2))

    def until(f: Frame, got: list[Frame]) -> bool:
        if isinstance(f, TextDelta):
            first_delta.set()
        return isinstance(f, Interrupt)

    task = asyncio.create_task(interrupt_after_first_delta())
    prompt = "Write a long story about a dragon who learns to bake bread."
    got = await _run(stage, [TranscriptFinal(turn_id=1, text=prompt)], until)
    await task
    i = next(i for i, f in enumerate(got) if isinstance(f, Interrupt))
    after = got[i + 1 :]
    assert not any(isinstance(f, (TextDelta, TextChunk)) and f.turn_id == 1 for f in after)
    assert not any(isinstance(f, TextChunk) and f.last for f in got)  # the reply never finished
    # Memory keeps only what was handed to the TTS (maybe nothing) for the interrupted reply.
    spoken = " ".join(f.text for f in got if isinstance(f, TextChunk))
    assert stage.messages[-1] == {"role": "assistant", "content": spoken}


async def test_set_heard_rewrites_a_cut_off_reply(cfg) -> None:
    stage = LlmStage(cfg, engine=object())  # no model needed: conversation bookkeeping only
    stage.messages += [{"role": "user", "content": "hi"}]
    stage.messages.append({"role": "assistant", "content": "Hello there, how are you today?"})
    stage._reply_msg[3] = len(stage.messages) - 1
    assert stage.set_heard(3, "Hello there,")
    assert stage.messages[-1] == {"role": "assistant", "content": "Hello there,"}
    assert not stage.set_heard(4, "nothing")
