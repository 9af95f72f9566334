"""Acoustic echo cancellation of the microphone, before VAD and ASR: AudioIn → AudioIn.

On a speakerphone the assistant's reply comes back into the user's microphone, and
Whisper hears it as words of the user's (docs/benchmarks/turns.md: every reply cut itself
off). This stage removes it with speexdsp's adaptive echo canceller
(``voicepipe.audio.EchoCanceller``), given the far-end reference: what the client's
loudspeaker played, lined up with the microphone's samples.

    output stage ──(each frame sent, resampled to 16 kHz, with its planned play time)──┐
    client ──(playback reports: when each reply's first sample played)──► this stage ──┤
                                                         core/playout/speaker.py: Speaker
    AudioIn ──► MicClock: capture time of each 10 ms ──► Speaker.reference(capture + lead)
            ──► speex_echo_cancellation(mic, reference) ──► AudioIn (cancelled) ──► ASR

The reference is taken ``LEAD_MS`` later than the capture time: the filter models a
reference that *leads* its echo (by the echo path's delay, up to ``audio.echo_tail_ms``),
and the estimates of both clocks err late (a report or a frame that arrives late), so a
little lead keeps the reference ahead of its echo. The residual-echo suppressor's output
is used only while reply audio plays (and ``SUPPRESS_TAIL_MS`` after): it is a noise
suppressor too, and the user's speech alone goes to the ASR untouched by it.

Where libspeexdsp does not load (or ``audio.echo_cancel = false``), the audio passes
through unchanged, after one log line that says why.
"""

from __future__ import annotations

import logging

import numpy as np

from voicepipe.audio import EchoCanceller, EchoCancellerUnavailable
from voicepipe.config import Config
from voicepipe.core.playout.echo_gate import EchoGate
from voicepipe.core.playout.speaker import MicClock, Speaker
from voicepipe.frames import (
    AudioIn,
    Frame,
    InputEnd,
    PlaybackReport,
    SystemFrame,
)
from voicepipe.stage import Stage

__all__ = ["EchoCancel", "Speaker"]  # (Speaker: pipelines hand it to the stages)

log = logging.getLogger(__name__)
LEAD_MS = 40
SUPPRESS_TAIL_MS = 500  # the room's reverberation and the alignment's error, with margin
# The echo gate's window reaches this far back from a frame's capture time: the echo
# path's delay, the room's reverberation and how late the playout may run.
GATE_BEFORE_MS = 300
_warned = False  # the fallback's log line: once per process, not once per session


class EchoCancel(Stage):
    name = "echo"
    intake = True  # the microphone's audio: never an old turn's work (voicepipe/stage.py)

    def __init__(self, cfg: Config, speaker: Speaker) -> None:
        super().__init__()
        self.cfg = cfg
        self.speaker = speaker
        self.aec: EchoCanceller | None = None
        self.mic = MicClock()
        self.gate: EchoGate | None = None
        self._carry = np.zeros(0, np.float32)  # samples short of a whole 10 ms frame
        self._carry_media_ns = 0  # media time of the carry's first sample
        self._rate = 0
        self.frames = 0  # 10 ms frames cancelled
        self.suppressed = 0  # of which the suppressor's output was used

    async def start(self) -> None:
        global _warned
        if not self.cfg.audio.echo_cancel:
            return
        try:
            self.aec = EchoCanceller(self.speaker.rate, self.cfg.audio.echo_tail_ms)
            self.gate = EchoGate(self.aec.frame)
        except EchoCancellerUnavailable as e:
            if not _warned:
                _warned = True
                log.warning("echo cancellation off: %s", e)

    async def stop(self) -> None:
        if self.aec is not None:
            self.aec.close()

    async def on_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, PlaybackReport):
            if frame.first_play_ns is not None:
                self.speaker.first_play(frame.reply_turn, frame.first_play_ns)
            # (the report's arrival: it was written a one-way trip before)
            self.speaker.progress(
                frame.reply_turn, frame.played_samples, frame.sample_rate, frame.t_ns
            )
            if frame.done:
                self.speaker.done(frame.reply_turn, frame.played_samples, frame.sample_rate)

    async def process(self, frame: Frame) -> None:
        if isinstance(frame, InputEnd) and len(self._carry):
            # The last few ms (less than a frame), as they came: nothing follows them.
            rate = self.aec.rate if self.aec is not None else self._rate
            carry, self._carry = self._carry, np.zeros(0, np.float32)
            await self.push(
                AudioIn(pcm=carry, sample_rate=rate, media_ns=self._carry_media_ns, seq=0)
            )
        if not isinstance(frame, AudioIn) or self.aec is None:
            await self.push(frame)
            return
        if frame.sample_rate != self.aec.rate:
            global _warned
            if not _warned:
                _warned = True
                log.warning(
                    "echo cancellation off: input at %d Hz, the canceller runs at %d Hz",
                    frame.sample_rate,
                    self.aec.rate,
                )
            self.aec.close()
            self.aec = None
            await self.push(frame)
            return
        await self._cancel(frame)

    async def _cancel(self, frame: AudioIn) -> None:
        assert self.aec is not None
        rate, n = self.aec.rate, self.aec.frame
        self._rate = rate
        pcm = np.asarray(frame.pcm, np.float32).reshape(-1)
        if not len(self._carry):
            self._carry_media_ns = frame.media_ns
        end_ns = frame.media_ns + len(pcm) * 1_000_000_000 // rate
        self.mic.arrived(end_ns, frame.t_ns)
        x = np.concatenate([self._carry, pcm])
        whole = len(x) // n * n
        if whole == 0:
            self._carry = x
            return
        out = np.empty(whole, np.float32)
        lead = LEAD_MS * 1_000_000
        tail = SUPPRESS_TAIL_MS * 1_000_000
        gate_before = GATE_BEFORE_MS * 1_000_000
        gate_n = (GATE_BEFORE_MS + LEAD_MS) * rate // 1000 + n
        for i in range(0, whole, n):
            media = self._carry_media_ns + i * 1_000_000_000 // rate
            captured = self.mic.capture_ns(media)
            assert captured is not None  # (arrived() was called above)
            ref = self.speaker.reference(captured + lead, n)
            cancelled, suppressed = self.aec.process(x[i : i + n], ref)
            self.frames += 1
            if self.speaker.active(captured - tail, captured + lead):
                self.suppressed += 1
                if self.gate is not None:
                    window = self.speaker.reference(captured - gate_before, gate_n)
                    suppressed = self.gate.apply(suppressed, window)
                out[i : i + n] = suppressed
            else:
                out[i : i + n] = cancelled
        media0 = self._carry_media_ns
        self._carry = x[whole:]
        self._carry_media_ns = media0 + whole * 1_000_000_000 // rate
        await self.push(
            AudioIn(
                turn_id=frame.turn_id,
                t_ns=frame.t_ns,
                pcm=out,
                sample_rate=rate,
                media_ns=media0,
                seq=frame.seq,
            )
        )
