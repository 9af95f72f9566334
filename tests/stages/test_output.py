"""Output pacer: 20 ms frames on a continuous timeline, resampling, stop within one frame."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import numpy as np
import pytest

from voicepipe import config
from voicepipe.core.playout.speaker import Speaker
from voicepipe.frames import Frame, InputEnd, Interrupt, PlayoutHold, ReplyAudio, ReplyEnd
from voicepipe.pipeline import Pipeline
from voicepipe.pipelines import SessionInfo
from voicepipe.stages.output import AudioOut, OutputStage, Pacer, ReplyFinished, ReplyStarted


def test_pacer_timeline_tracks_real_time_across_pauses() -> None:
    p = Pacer(16000, lead_ns=60_000_000)
    assert p.start_reply(now_ns=1_000_000_000) == 0
    assert p.play_ns(0) == 1_060_000_000 and p.send_ns(0) == 1_000_000_000
    p.advance(16000)  # 1 s of audio
    assert p.play_ns(16000) == 2_060_000_000
    # the next reply starts right away: it continues the timeline
    assert p.start_reply(now_ns=1_500_000_000) == 16000
    p.advance(1600)
    # after a 3 s pause the timeline jumps so the first sample is heard lead after now
    ts = p.start_reply(now_ns=5_000_000_000)
    assert ts == (5_060_000_000 - 1_060_000_000) * 16000 // 1_000_000_000
    assert p.send_ns(ts) == 5_000_000_000


def _cfg(lead_ms: int = 40) -> config.Config:
    cfg = config.Config()
    return dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, lead_ms=lead_ms))


async def _run(
    frames: list[Frame], out_rate: int, *, interrupt_after: int | None = None
) -> list[Frame]:
    cfg = _cfg()
    session = SessionInfo.for_config(cfg, output_sample_rate=out_rate)
    out: list[Frame] = []
    done = asyncio.Event()
    seen_audio = asyncio.Event()

    async def sink(f: Frame) -> None:
        out.append(f)
        if isinstance(f, AudioOut) and interrupt_after is not None:
            if sum(isinstance(x, AudioOut) for x in out) >= interrupt_after:
                seen_audio.set()
        if isinstance(f, InputEnd):
            done.set()

    p = Pipeline([OutputStage(cfg, session)], sink)
    await p.start()
    feeder = asyncio.create_task(_feed(p, frames))
    if interrupt_after is not None:
        await asyncio.wait_for(seen_audio.wait(), 5)
        out.append(Interrupt(turn_id=-1))  # marks the moment, for the assertion
        await p.put(Interrupt(turn_id=2))
    await asyncio.wait_for(done.wait(), 10)
    await feeder
    await p.stop()
    return out


async def _feed(p: Pipeline, frames: list[Frame]) -> None:
    for f in frames:
        await p.put(f)


def _tone(n: int, rate: int) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * 220 * np.arange(n) / rate)).astype(np.float32)


async def test_frames_seq_media_ts_and_last() -> None:
    pcm = _tone(16000 * 3 // 10 + 100, 16000)  # 0.3 s + 100 samples, in 3 chunks
    chunks = np.array_split(pcm, 3)
    frames: list[Frame] = [ReplyAudio(turn_id=1, pcm=c, sample_rate=16000) for c in chunks]
    frames += [ReplyEnd(turn_id=1, text="hi"), InputEnd(turn_id=1)]
    out = await _run(frames, 16000)
    kinds = [type(f).__name__ for f in out if type(f).__name__ != "End"]
    assert kinds[0] == "ReplyStarted" and kinds[-1] == "InputEnd"
    audio = [f for f in out if isinstance(f, AudioOut)]
    assert [len(a.pcm) for a in audio] == [320] * 15 + [100]
    assert [a.seq for a in audio] == list(range(16))
    assert [a.media_ts for a in audio] == [320 * i for i in range(16)]
    assert [a.last for a in audio] == [False] * 15 + [True]
    got = np.concatenate([a.pcm for a in audio]).astype(np.float32) / 32768
    np.testing.assert_allclose(got, pcm, atol=1 / 32768)
    fin = next(f for f in out if isinstance(f, ReplyFinished))
    assert (fin.text, fin.samples, fin.interrupted) == ("hi", len(pcm), False)


async def test_resamples_to_the_session_rate() -> None:
    pcm = _tone(22050 // 5, 22050)  # 0.2 s
    out = await _run(
        [
            ReplyAudio(turn_id=1, pcm=pcm, sample_rate=22050),
            ReplyEnd(turn_id=1),
            InputEnd(turn_id=1),
        ],
        48000,
    )
    audio = [f for f in out if isinstance(f, AudioOut)]
    assert all(len(a.pcm) == 960 for a in audio[:-1])
    total = sum(len(a.pcm) for a in audio)
    assert abs(total - 9600) <= 2
    start = next(f for f in out if isinstance(f, ReplyStarted))
    assert start.sample_rate == 48000


@pytest.mark.timeout(30)  # an Inbox that spins after drop_data used to hang here
async def test_interrupt_stops_within_one_frame() -> None:
    pcm = _tone(16000 * 3, 16000)  # 3 s: far longer than the test waits
    frames: list[Frame] = [
        ReplyAudio(turn_id=1, pcm=c, sample_rate=16000) for c in np.array_split(pcm, 30)
    ]
    frames += [ReplyEnd(turn_id=1), InputEnd(turn_id=2)]
    out = await _run(frames, 16000, interrupt_after=5)
    mark = next(i for i, f in enumerate(out) if isinstance(f, Interrupt) and f.turn_id == -1)
    after = [f for f in out[mark:] if isinstance(f, AudioOut)]
    assert after == []  # every frame is checked against queued interrupts before it goes
    fin = [f for f in out if isinstance(f, ReplyFinished)]
    assert len(fin) == 1 and fin[0].interrupted and fin[0].samples < len(pcm) // 4


async def test_a_held_reply_stops_sending_and_resumes_where_it_stopped() -> None:
    """PlayoutHold: not one more frame while held; on resume the rest follows, the
    timeline jumped by the pause (no frame late), and every sample is sent once."""
    cfg = _cfg()
    session = SessionInfo.for_config(cfg, output_sample_rate=16000)
    speaker = Speaker(16000)
    out: list[tuple[int, Frame]] = []
    done = asyncio.Event()
    playing = asyncio.Event()

    async def sink(f: Frame) -> None:
        out.append((time.monotonic_ns(), f))
        if sum(isinstance(x, AudioOut) for _, x in out) >= 10:
            playing.set()
        if isinstance(f, InputEnd):
            done.set()

    stage = OutputStage(cfg, session, speaker=speaker)
    p = Pipeline([stage], sink)
    await p.start()
    pcm = _tone(16000, 16000)  # 1 s
    frames: list[Frame] = [
        ReplyAudio(turn_id=1, pcm=c, sample_rate=16000, text="one two" if i == 0 else "")
        for i, c in enumerate(np.array_split(pcm, 10))
    ]
    feeder = asyncio.create_task(_feed(p, [*frames, ReplyEnd(turn_id=1), InputEnd()]))
    await asyncio.wait_for(playing.wait(), 10)
    await p.put(PlayoutHold(turn_id=2, hold=True))
    await asyncio.sleep(0.05)  # (a frame already on its way may still land)
    held_at = time.monotonic_ns()
    n_held = sum(isinstance(f, AudioOut) for _, f in out)
    await asyncio.sleep(0.4)
    assert sum(isinstance(f, AudioOut) for _, f in out) == n_held  # nothing while held
    await p.put(PlayoutHold(turn_id=2, hold=False))
    await asyncio.wait_for(done.wait(), 10)
    await feeder
    await p.stop()
    audio = [f for _, f in out if isinstance(f, AudioOut)]
    after = [f for t, f in out if isinstance(f, AudioOut) and t > held_at]
    assert after, "the reply resumed"
    assert sum(len(f.pcm) for f in audio) == len(pcm)  # every sample, once
    # The timeline jumped by about the pause: the first frame after it is ~0.4 s later
    # on the timeline than the last one before it ended.
    before = audio[len(audio) - len(after) - 1]
    gap = after[0].media_ts - (before.media_ts + len(before.pcm))
    assert gap >= 0.3 * 16000, gap
    assert stage.late_frames == 0 and stage.holds == 1
    (finished,) = [f for _, f in out if isinstance(f, ReplyFinished)]
    assert not finished.interrupted
    # The speaker record has all of it, with the pause in its plan.
    assert speaker.words(0, 2**62) == ["one", "two"]
