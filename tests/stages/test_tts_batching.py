"""`tts.batching`: every session's codec-LM synthesis on the process's TTS batcher.

Several TTS stages (sessions) speak at once over one batcher: each gets the audio it
gets alone, their LM steps really ran together, and a barge-in or a cut reply in one
session is handled per session while the others keep speaking."""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import pytest

from tests.stages._frames import sink as _sink
from tests.stages._frames import wait_for as _wait_for
from voicepipe import config
from voicepipe.frames import (
    Frame,
    InputEnd,
    Interrupt,
    PlaybackReport,
    ReplyAudio,
    ReplyEnd,
    ReplyHeard,
    SpanFrame,
    TextChunk,
)
from voicepipe.pipeline import Pipeline
from voicepipe.schedulers.tts_batch import tts_batcher_for
from voicepipe.stages.tts import CodecLMBackend, TTSStage

TEXTS = [
    "Sure! The capital of France is Paris.",
    "It is sunny and twelve degrees in Lisbon today.",
    "Your meeting with Anna starts at half past three.",
]


def _cfg(batching: bool) -> config.Config:
    c = config.Config()
    return dataclasses.replace(c, tts=dataclasses.replace(c.tts, batching=batching))


async def _speak_all(batching: bool, texts: list[str]) -> list[list[Frame]]:
    cfg = _cfg(batching)
    outs: list[list[Frame]] = [[] for _ in texts]
    pipes = [Pipeline([TTSStage(cfg, CodecLMBackend(cfg))], _sink(o)) for o in outs]
    for p in pipes:
        await p.start()
    for p, t in zip(pipes, texts, strict=True):
        await p.put(TextChunk(turn_id=1, text=t, last=True))
        await p.put(InputEnd(turn_id=1))
    for o in outs:
        await _wait_for(o, InputEnd)
    for p in pipes:
        await p.stop()
    return outs


def _audio(out: list[Frame], turn: int = 1) -> np.ndarray:
    return np.concatenate([f.pcm for f in out if isinstance(f, ReplyAudio) and f.turn_id == turn])


async def test_sessions_speaking_at_once_get_their_own_audio_and_share_steps() -> None:
    batcher = tts_batcher_for(CodecLMBackend(_cfg(True)).tts)
    alone = await _speak_all(False, TEXTS)
    batcher.max_batch = 0
    together = await _speak_all(True, TEXTS)
    assert batcher.max_batch >= 2  # their LM steps ran in shared passes
    for text, a, b in zip(TEXTS, alone, together, strict=True):
        wa, wb = _audio(a), _audio(b)
        assert len(wa) == len(wb) > 22050  # the same codes: the same length
        assert np.isfinite(wb).all()
        assert float(np.abs(wa - wb).max()) < 0.05  # (the vocoder's thread count may differ)
        kinds = [type(f) for f in b if isinstance(f, SpanFrame | ReplyAudio | ReplyEnd)]
        assert kinds[0] is SpanFrame and kinds[1] is ReplyAudio and kinds[-1] is ReplyEnd
        assert next(f for f in b if isinstance(f, ReplyEnd)).text == text
    assert not batcher._jobs


async def test_barge_in_stops_one_session_while_the_other_keeps_speaking() -> None:
    cfg = _cfg(True)
    long = " ".join(f"This is sentence number {i} of a long reply." for i in range(8))
    a_out: list[Frame] = []
    b_out: list[Frame] = []
    a = Pipeline([TTSStage(cfg, CodecLMBackend(cfg))], _sink(a_out))
    b = Pipeline([TTSStage(cfg, CodecLMBackend(cfg))], _sink(b_out))
    await a.start()
    await b.start()
    await a.put(TextChunk(turn_id=1, text=long, last=True))
    await b.put(TextChunk(turn_id=1, text=TEXTS[1], last=True))
    await _wait_for(a_out, ReplyAudio)
    await a.put(Interrupt(turn_id=2))
    await a.put(TextChunk(turn_id=2, text="Okay.", last=True))
    await a.put(InputEnd(turn_id=2))
    await b.put(InputEnd(turn_id=1))
    await _wait_for(a_out, InputEnd)
    await _wait_for(b_out, InputEnd)
    await a.stop()
    await b.stop()
    i_int = next(i for i, f in enumerate(a_out) if isinstance(f, Interrupt))
    after = [f for f in a_out[i_int:] if isinstance(f, ReplyAudio | ReplyEnd)]
    assert after and all(f.turn_id == 2 for f in after)  # nothing of turn 1 after it
    assert len(_audio(a_out, 1)) < 8 * 2.5 * 22050  # turn 1 was cut short
    assert len(_audio(a_out, 2)) > 0.2 * 22050
    assert len(_audio(b_out)) > 1.5 * 22050  # the other session spoke its whole text
    assert any(isinstance(f, ReplyEnd) for f in b_out)
    batcher = tts_batcher_for(CodecLMBackend(cfg).tts)
    for _ in range(100):  # the cancelled job leaves at the worker's next round
        if not batcher._jobs:
            break
        await asyncio.sleep(0.05)
    assert not batcher._jobs


async def test_a_cut_reply_is_trimmed_to_the_heard_words_inside_a_batch() -> None:
    cfg = _cfg(True)
    first, second = "Sure, the capital of France is Paris.", "It sits on the river Seine today."
    out: list[Frame] = []
    up: list[Frame] = []
    other: list[Frame] = []
    stage = TTSStage(cfg, CodecLMBackend(cfg))
    p = Pipeline([stage], _sink(out), upstream_sink=_sink(up))
    q = Pipeline([TTSStage(cfg, CodecLMBackend(cfg))], _sink(other))
    await p.start()
    await q.start()
    await q.put(TextChunk(turn_id=1, text=TEXTS[2], last=True))
    await p.put(TextChunk(turn_id=1, text=first))
    await p.put(TextChunk(turn_id=1, text=second, last=True))
    await _wait_for(out, ReplyEnd)
    n1 = stage._spoken[1].chunks[0][1] * 22050
    n2 = len(_audio(out)) - n1
    played = int(n1 + n2 * 4.2 / 7)
    await p.put(
        PlaybackReport(turn_id=1, reply_turn=1, played_samples=played, sample_rate=22050, done=True)
    )
    await _wait_for(up, ReplyHeard, timeout_s=5)
    await _wait_for(other, ReplyEnd)
    await p.stop()
    await q.stop()
    (heard,) = [f for f in up if isinstance(f, ReplyHeard)]
    assert heard.text == first + " It sits on the"


@pytest.mark.parametrize("text", ["", "...", "Okay."])
async def test_texts_with_little_or_nothing_to_say_end_cleanly(text: str) -> None:
    cfg = _cfg(True)
    out: list[Frame] = []
    p = Pipeline([TTSStage(cfg, CodecLMBackend(cfg))], _sink(out))
    await p.start()
    await p.put(TextChunk(turn_id=1, text=text, last=True))
    await p.put(InputEnd(turn_id=1))
    await _wait_for(out, InputEnd, timeout_s=30)
    await p.stop()
    assert p.error is None and any(isinstance(f, ReplyEnd) for f in out)
