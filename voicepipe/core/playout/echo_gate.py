"""Mute what the loudspeaker explains: an echo gate after the echo canceller. Sans-I/O.

A linear echo canceller needs its reference lined up with the echo to within its filter
and the echo path to hold still while it adapts. A client's playout buffer does not hold
still: it conceals when it runs dry and time-compresses to catch up (core/playout/
jitter.py), so what its speaker played drifts by tens of milliseconds from what the
server sent, and on a busy host, where the reply comes late, often. The canceller then
removes only a few dB, and the rest is enough for the VAD and Whisper to hear words.

``EchoGate`` needs no exact alignment, only levels. For each 10 ms microphone frame it
takes the loudest 10 ms of the reference within an uncertainty window around the
frame's time (what the speaker may be playing into the mic now), and the ratio of the
frame's power to it. Over the frames where the speaker played steadily through the whole
window, that ratio's upper middle (``quantile``) is the echo's level relative to its
reference (the echo return loss, room and canceller included); a frame no louder than
that plus ``margin_db`` is echo and is attenuated to ``floor_db``; a louder one is the
user talking over it and passes. The learnt level falls at once but rises by at most
``rise_db_per_s``: the user talking over the speaker for a while must not teach the gate
that their voice is the echo (and frames around a pause or the end of a reply, when the
speaker stops but the window still holds its last words, are not learnt from at all). The
user's speech is usually well above the echo at the mic (a speakerphone's echo arrives
10–20 dB down), so a margin of a few dB keeps most of it; the price is that a user who
talks as softly as the echo, while the assistant speaks, is not heard until it stops.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GateConfig:
    # Above the echo's usual level: the user's speech. The echo's level, relative to the
    # loudest reference near it, spreads by several dB from frame to frame (bench turns'
    # speakerphone: frames 2-3 dB over a 6 dB margin reached Whisper as words), but a
    # 10 dB margin muted two of four users' interruptions in bench turns.
    margin_db: float = 6.0
    floor_db: float = -40.0  # what a gated frame keeps
    quantile: float = 0.7  # of recent ratios: the echo's level, double talk kept out
    history: int = 300  # frames (3 s of 10 ms) the echo's level is learnt over
    learn_frames: int = 5  # before this many, assume ``default_db``
    # Before anything is learnt: a speakerphone's usual echo, 10 dB down. (0 dB, "as loud
    # as its reference", muted a Realtime client's "stop" said as the first reply began.)
    default_db: float = -10.0
    silence_db: float = -60.0  # a quieter reference is a silent speaker (dBFS power)
    # Learn only while the speaker played through the window: at least ``steady_share``
    # of its 10 ms within ``steady_db`` of the loudest (not stopped, not just starting).
    steady_db: float = 40.0
    steady_share: float = 0.8
    rise_db_per_s: float = 3.0

    def __post_init__(self) -> None:
        if (
            not 0.0 < self.quantile < 1.0
            or self.history < self.learn_frames
            or self.learn_frames < 1
        ):
            raise ValueError("need 0 < quantile < 1 and 1 <= learn_frames <= history")


def power_db(x: np.ndarray) -> float:
    """Mean power of float samples, dB full scale (-120 for silence)."""
    p = float(np.mean(np.square(x, dtype=np.float64))) if len(x) else 0.0
    return 10.0 * math.log10(p) if p > 1e-12 else -120.0


class EchoGate:
    """One microphone stream's gate; ``frame`` is the 10 ms frame length in samples."""

    def __init__(self, frame: int, cfg: GateConfig | None = None) -> None:
        if frame <= 0:
            raise ValueError("frame must be > 0")
        self.frame = frame
        self.cfg = cfg or GateConfig()
        self._ratios: deque[float] = deque(maxlen=self.cfg.history)
        self._level = self.cfg.default_db
        self._rise = self.cfg.rise_db_per_s / 10  # per 10th frame: 100 ms
        self._seen = 0
        self.gated = 0  # frames attenuated
        self.passed = 0  # frames over a playing speaker let through

    def echo_db(self) -> float:
        """The echo's level relative to the loudest reference near it, as learnt so far."""
        return self._level

    def _learn(self, ratio: float) -> None:
        self._ratios.append(ratio)
        self._seen += 1
        # (the quantile every 10th frame: per frame it was most of the stage's time)
        if len(self._ratios) < self.cfg.learn_frames or self._seen % 10:
            return
        q = float(np.quantile(np.fromiter(self._ratios, float), self.cfg.quantile))
        self._level = q if q < self._level else min(q, self._level + self._rise)

    def apply(self, mic: np.ndarray, reference: np.ndarray) -> np.ndarray:
        """``mic``: one frame (after the canceller); ``reference``: what the speaker played
        over the window around it (any length, in whole or part frames). Returns the frame,
        attenuated when the reference explains it."""
        n = self.frame
        ref = np.asarray(reference, np.float32)
        k = len(ref) // n
        if k == 0:
            return mic
        frames = ref[: k * n].reshape(k, n).astype(np.float64)
        powers = np.mean(frames * frames, axis=1)
        loudest = float(np.max(powers))
        ref_db = 10.0 * math.log10(loudest) if loudest > 1e-12 else -120.0
        if ref_db < self.cfg.silence_db:
            return mic  # the speaker is silent: nothing to gate
        ratio = power_db(mic) - ref_db
        limit = self.echo_db() + self.cfg.margin_db
        playing = float(np.mean(powers >= loudest * 10 ** (-self.cfg.steady_db / 10)))
        if playing >= self.cfg.steady_share:
            self._learn(ratio)
        if ratio <= limit:
            self.gated += 1
            out: np.ndarray = (mic * 10 ** (self.cfg.floor_db / 20)).astype(np.float32)
            return out
        self.passed += 1
        return mic
