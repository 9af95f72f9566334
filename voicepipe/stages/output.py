"""Server-side pacing of reply audio (docs/DESIGN.md §8, docs/PROTOCOL.md "Output timeline").

Reply audio (``ReplyAudio``, any rate) is resampled with a streaming soxr
resampler to the session's output rate, cut into ``frame_ms`` frames that
carry a sequence number and a media timestamp on the session's continuous
output timeline, and released at real time, at most ``output.lead_ms`` ahead
of when each frame should be heard. Pacing happens inside ``process``, so an
``Interrupt`` for a newer turn (which cancels in-flight work) stops the reply
within one frame; a bounded inbox makes a fast TTS wait instead of buffering
without limit.

Frames this stage emits (the server turns them into wire messages):
``ReplyStarted`` → ``reply_start``, ``AudioOut`` → a kind-2 audio frame,
``ReplyFinished`` → ``reply_end``.

``PlayoutHold`` (from the barge-in stage, while speech over the reply is judged) stops
the sending at the next frame; ``hold=False`` resumes where it stopped, the output
timeline jumped forward by the pause (as after a silence between replies), so the
client's playout buffer sees no late frames. With a ``Speaker`` (core/playout/speaker.py)
every frame sent, resampled to the ASR's rate, and each text chunk's start are recorded
there: the echo canceller's reference and the echo gating's words.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

import numpy as np
import soxr

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.playout.speaker import Speaker
from voicepipe.core.wire.protocol import pcm16_from_float
from voicepipe.frames import (
    Cancel,
    Frame,
    InputEnd,
    Interrupt,
    MetricsFrame,
    PlayoutHold,
    ReplyAudio,
    ReplyEnd,
    SystemFrame,
)
from voicepipe.stage import Stage


@dataclass(kw_only=True)
class ReplyStarted(Frame):
    media_ts: int  # first sample of the reply on the output timeline
    sample_rate: int


@dataclass(kw_only=True)
class AudioOut(Frame):
    pcm: np.ndarray  # (N,) int16 at sample_rate
    sample_rate: int
    seq: int
    media_ts: int
    last: bool = False


@dataclass(kw_only=True)
class ReplyFinished(Frame):
    text: str = ""
    samples: int = 0  # samples of this reply that were sent
    interrupted: bool = False


class Pacer:
    """The output timeline, sans-I/O: media_ts (samples) ↔ when to play / when to send.

    The first reply starts at media_ts 0, to be heard ``lead_ns`` after it
    starts; a later reply starts where the previous one ended or, after a
    pause, where real time (plus the lead) has got to, so the timeline keeps
    tracking real time across silences.
    """

    def __init__(self, sample_rate: int, lead_ns: int) -> None:
        self.rate = sample_rate
        self.lead_ns = lead_ns
        self.epoch_ns: int | None = None  # when media_ts 0 is heard
        self.next_ts = 0

    def start_reply(self, now_ns: int) -> int:
        if self.epoch_ns is None:
            self.epoch_ns = now_ns + self.lead_ns
            self.next_ts = 0
        else:
            self.resume(now_ns)
        return self.next_ts

    def resume(self, now_ns: int) -> None:
        """After a pause: the next sample plays no earlier than ``lead_ns`` from now."""
        assert self.epoch_ns is not None, "start_reply first"
        due = math.ceil((now_ns + self.lead_ns - self.epoch_ns) * self.rate / 1e9)
        self.next_ts = max(self.next_ts, due)

    def play_ns(self, media_ts: int) -> int:
        assert self.epoch_ns is not None, "start_reply first"
        return self.epoch_ns + media_ts * 1_000_000_000 // self.rate

    def send_ns(self, media_ts: int) -> int:
        return self.play_ns(media_ts) - self.lead_ns

    def advance(self, n: int) -> int:
        ts = self.next_ts
        self.next_ts += n
        return ts


class OutputStage(Stage):
    name = "output"

    def __init__(
        self,
        cfg: Config,
        session: object,
        *,
        queue_size: int = 8,
        speaker: Speaker | None = None,
    ) -> None:
        super().__init__(queue_size=queue_size)
        self.speaker = speaker
        self._ref: soxr.ResampleStream | None = None  # this reply's audio → speaker.rate
        self._playing = asyncio.Event()  # cleared while a PlayoutHold is on
        self._playing.set()
        self.holds = 0
        rate = int(getattr(session, "output_sample_rate", 0) or cfg.audio.output_sample_rate)
        frame_ms = int(getattr(session, "frame_ms", 0) or cfg.audio.frame_ms)
        self.rate = rate
        self.frame_len = max(1, rate * frame_ms // 1000)
        self.pacer = Pacer(rate, cfg.output.lead_ms * 1_000_000)
        self.seq = 0
        self.reply_turn: int | None = None  # turn of the reply being sent, if any
        self.sent = 0  # samples of the current reply
        self.late_frames = 0
        self._pending = np.zeros(0, np.float32)
        self._stream: soxr.ResampleStream | None = None
        self._stream_rate = 0

    # ------------------------------------------------------------------ frames

    async def process(self, frame: Frame) -> None:
        if isinstance(frame, ReplyAudio):
            if self.reply_turn is not None and self.reply_turn != frame.turn_id:
                await self._finish(self.reply_turn, "", interrupted=False)
            if self.reply_turn is None:
                await self._begin(frame.turn_id)
            if frame.text and self.speaker is not None:
                at = self.sent + len(self._pending)  # (the chunk starts after what is queued)
                self.speaker.chunk(frame.turn_id, frame.text, at)
            self._pending = np.concatenate([self._pending, self._resample(frame)])
            while len(self._pending) >= self.frame_len:
                chunk, self._pending = (
                    self._pending[: self.frame_len],
                    self._pending[self.frame_len :],
                )
                await self._send(chunk, last=False)
        elif isinstance(frame, ReplyEnd):
            if self.reply_turn == frame.turn_id:
                await self._finish(frame.turn_id, frame.text, interrupted=False)
            else:  # a reply without audio (or whose audio was cut already)
                await self.push(ReplyFinished(turn_id=frame.turn_id, text=frame.text))
        elif isinstance(frame, InputEnd):
            if self.reply_turn is not None:
                await self._finish(self.reply_turn, "", interrupted=False)
            await self.push(frame)
        else:
            await self.push(frame)

    async def on_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, PlayoutHold):
            self._hold(frame.hold)
            return
        turn = self.reply_turn
        if isinstance(frame, Interrupt):
            self._hold(False)  # (the reply it held is cut below; a later one must play)
        if turn is None:
            return
        cut = (isinstance(frame, Interrupt) and turn < frame.turn_id) or (
            isinstance(frame, Cancel) and turn == frame.turn_id
        )
        if cut:
            sent = self.sent
            self._reset()
            await self.push(ReplyFinished(turn_id=turn, samples=sent, interrupted=True))

    def _hold(self, hold: bool) -> None:
        if hold and self._playing.is_set():
            self._playing.clear()
            self.holds += 1
        elif not hold and not self._playing.is_set():
            if self.pacer.epoch_ns is not None:
                self.pacer.resume(now_ns())  # the timeline jumps by the pause
            self._playing.set()

    # ------------------------------------------------------------------ helpers

    def _resample(self, frame: ReplyAudio) -> np.ndarray:
        pcm = np.asarray(frame.pcm, dtype=np.float32).reshape(-1)
        if frame.sample_rate == self.rate:
            return pcm
        if self._stream is None or self._stream_rate != frame.sample_rate:
            # vr=True: soxr's default streaming mode emits output in ~50 ms blocks (16 kHz →
            # 22.05 kHz: ~1130 samples every 2–3 input chunks of 20 ms), so a reply produced at
            # about real time reached the client in 2–3-frame bursts and its first frames came
            # late: the playout buffer, started at one frame + margin, ran dry once (bench jitter).
            # The variable-rate engine emits in proportion to its input (~10–15 ms latency),
            # with the same passband (gain within 0.001 dB up to 7.5 kHz) and a tiny CPU cost.
            self._stream = soxr.ResampleStream(
                frame.sample_rate, self.rate, 1, dtype="float32", quality="HQ", vr=True
            )
            self._stream_rate = frame.sample_rate
        return self._stream.resample_chunk(pcm)

    async def _begin(self, turn: int) -> None:
        self.reply_turn = turn
        self.sent = 0
        ts = self.pacer.start_reply(now_ns())
        await self.push(ReplyStarted(turn_id=turn, media_ts=ts, sample_rate=self.rate))

    async def _send(self, pcm: np.ndarray, *, last: bool) -> None:
        assert self.reply_turn is not None
        while True:
            await self._playing.wait()  # a PlayoutHold: not one more frame until resumed
            ts = self.pacer.next_ts
            wait_ns = self.pacer.send_ns(ts) - now_ns()
            if wait_ns > 0:
                await asyncio.sleep(wait_ns / 1e9)
            else:
                if now_ns() > self.pacer.play_ns(ts):
                    self.late_frames += 1  # produced after it should already be heard
                await asyncio.sleep(0)  # a late burst must still let other sessions run
            if self._playing.is_set():
                break
        if self._cut_pending():
            # The Interrupt is queued but not handled yet: not one more frame.
            raise asyncio.CancelledError
        out = AudioOut(
            turn_id=self.reply_turn,
            pcm=pcm16_from_float(pcm),
            sample_rate=self.rate,
            seq=self.seq,
            media_ts=ts,
            last=last,
        )
        await self.push(out)
        if self.speaker is not None:
            self.speaker.sent(
                self.reply_turn, self.pacer.play_ns(ts), len(pcm), self.rate, self._to_ref(pcm)
            )
        self.seq = (self.seq + 1) % (1 << 32)
        self.pacer.advance(len(pcm))
        self.sent += len(pcm)

    def _cut_pending(self) -> bool:
        turn = self.reply_turn
        for f in list(self.inbox._system):
            if isinstance(f, Interrupt) and turn is not None and turn < f.turn_id:
                return True
            if isinstance(f, Cancel) and turn == f.turn_id:
                return True
        return False

    async def _finish(self, turn: int, text: str, *, interrupted: bool) -> None:
        if self._stream is not None:
            tail = self._stream.resample_chunk(np.zeros(0, np.float32), last=True)
            self._pending = np.concatenate([self._pending, tail])
        while len(self._pending) > self.frame_len:
            chunk, self._pending = self._pending[: self.frame_len], self._pending[self.frame_len :]
            await self._send(chunk, last=False)
        await self._send(self._pending, last=True)  # may be shorter than a frame, even empty
        sent = self.sent
        self._reset()
        await self.push(
            ReplyFinished(turn_id=turn, text=text, samples=sent, interrupted=interrupted)
        )
        await self.push(
            MetricsFrame(
                turn_id=turn,
                source="output",
                values={"reply_samples": sent, "late_frames": self.late_frames},
            )
        )

    def _to_ref(self, pcm: np.ndarray, *, last: bool = False) -> np.ndarray:
        """Sent audio at the speaker's (the ASR's) rate, one stream per reply."""
        assert self.speaker is not None
        if self.speaker.rate == self.rate:
            return pcm
        if self._ref is None:
            self._ref = soxr.ResampleStream(
                self.rate, self.speaker.rate, 1, dtype="float32", vr=True
            )
        out: np.ndarray = self._ref.resample_chunk(pcm, last=last)
        return out

    def _reset(self) -> None:
        if self.speaker is not None and self.reply_turn is not None:
            tail = self._to_ref(np.zeros(0, np.float32), last=True) if self._ref else None
            self.speaker.finish(self.reply_turn, tail)
        self._ref = None
        self.reply_turn = None
        self.sent = 0
        self._pending = np.zeros(0, np.float32)
        self._stream = None
        self._stream_rate = 0
