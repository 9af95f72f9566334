"""TTS stage with the real hibari backend: audio per chunk, tts.ttfa span, ReplyEnd, interrupt."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from voicepipe import config
from voicepipe.frames import Frame, InputEnd, Interrupt, ReplyAudio, ReplyEnd, SpanFrame, TextChunk
from voicepipe.pipeline import Pipeline
from voicepipe.stages.tts import HibariBackend, TTSStage


@pytest.fixture(scope="module")
def backend() -> HibariBackend:
    return HibariBackend()


async def test_text_chunks_become_audio_span_and_reply_end(backend: HibariBackend) -> None:
    out: list[Frame] = []
    p = Pipeline([TTSStage(config.Config(), backend)], _sink(out))
    await p.start()
    await p.put(TextChunk(turn_id=1, text="Sure! The capital of France is Paris."))
    await p.put(TextChunk(turn_id=1, text="It is lovely in spring.", last=True))
    await p.put(InputEnd(turn_id=2))
    await _wait_for(out, InputEnd)
    await p.stop()
    audio = [f for f in out if isinstance(f, ReplyAudio)]
    spans = [f for f in out if isinstance(f, SpanFrame) and f.name == "tts.ttfa"]
    ends = [f for f in out if isinstance(f, ReplyEnd)]
    assert len(audio) >= 2 and all(a.sample_rate == 22050 and a.turn_id == 1 for a in audio)
    total = sum(len(a.pcm) for a in audio) / 22050
    assert 2.0 < total < 8.0
    assert len(spans) == 2 and spans[0].end_ns > spans[0].start_ns
    assert len(ends) == 1 and "Paris" in ends[0].text and "spring" in ends[0].text
    assert out.index(ends[0]) > out.index(audio[-1])
    assert all(np.isfinite(a.pcm).all() for a in audio)


async def _wait_for(out: list[Frame], kind: type, timeout_s: float = 120.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if any(isinstance(f, kind) for f in out):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {kind.__name__} within {timeout_s} s")


def _sink(out: list[Frame]):
    async def sink(f: Frame) -> None:
        out.append(f)

    return sink


async def test_interrupt_stops_old_turn_at_once(backend: HibariBackend) -> None:
    out: list[Frame] = []
    stage = TTSStage(config.Config(), backend)
    p = Pipeline([stage], _sink(out))
    await p.start()
    long = " ".join(f"This is sentence number {i} of a long reply." for i in range(12))
    await p.put(TextChunk(turn_id=1, text=long, last=True))
    await _wait_for(out, ReplyAudio)
    await p.put(Interrupt(turn_id=2))
    await p.put(TextChunk(turn_id=2, text="Okay.", last=True))
    await p.put(InputEnd(turn_id=2))
    await _wait_for(out, InputEnd)
    await p.stop()
    i_int = next(i for i, f in enumerate(out) if isinstance(f, Interrupt))
    after = [f for f in out[i_int:] if isinstance(f, ReplyAudio | ReplyEnd)]
    assert all(f.turn_id == 2 for f in after)  # nothing of turn 1 after the interrupt
    assert any(isinstance(f, ReplyAudio) and f.turn_id == 2 for f in after)
    old = sum(len(f.pcm) for f in out if isinstance(f, ReplyAudio) and f.turn_id == 1)
    assert old < 12 * 22050  # turn 1 was cut short


async def test_codec_lm_backend_streams_several_chunks() -> None:
    from voicepipe.stages.tts import CodecLMBackend

    out: list[Frame] = []
    p = Pipeline([TTSStage(config.Config(), CodecLMBackend(config.Config()))], _sink(out))
    await p.start()
    await p.put(TextChunk(turn_id=3, text="The store opens at nine.", last=True))
    await p.put(InputEnd(turn_id=3))
    await _wait_for(out, InputEnd)
    await p.stop()
    audio = [f for f in out if isinstance(f, ReplyAudio)]
    assert len(audio) >= 2  # streamed in codec-frame chunks, not one block
    span = next(f for f in out if isinstance(f, SpanFrame) and f.name == "tts.ttfa")
    assert span.attrs["backend"] == "codec-lm"
    assert out.index(span) < out.index(audio[0])
    assert 0.8 < sum(len(a.pcm) for a in audio) / 22050 < 3.5
