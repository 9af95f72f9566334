"""Drop the silence a synthesized chunk starts with, keeping a short breath before its
first audible sample. Sans-I/O: audio chunks in, audio chunks out.

A TTS voice starts every utterance with silence of its own (hibari's leading pad is
300-375 ms; the codec LM trained on its durations reproduces it). Sent as is, the
listener waits through it before the first word, every reply, on top of everything
the pipeline spent; shortening the pad in the synthesis instead cost intelligibility
(the codec LM garbled or dropped the first phoneme: docs/benchmarks/tts.md). So the
voice is synthesized as trained, and the silence is not sent.
"""

from __future__ import annotations

import numpy as np


class LeadTrim:
    """``push(chunk)`` → what to send of it: nothing until the first sample above
    ``threshold`` (absolute, in the stream's units), then from ``margin`` samples before
    that sample on, and everything after. At most ``max_drop`` samples are ever dropped:
    a chunk that stays quiet that long is sent as it is (a whisper is still speech)."""

    def __init__(self, threshold: float, margin: int, max_drop: int) -> None:
        if threshold <= 0 or margin < 0 or max_drop < 0:
            raise ValueError("threshold must be > 0, margin and max_drop >= 0")
        self.threshold, self.margin, self.max_drop = threshold, margin, max_drop
        self.dropped = 0  # samples not sent
        self._held = np.zeros(0, np.float32)  # the last ``margin`` quiet samples
        self._open = False

    def push(self, pcm: np.ndarray) -> np.ndarray:
        if self._open:
            return pcm
        x = np.concatenate([self._held, np.asarray(pcm, np.float32)])
        loud = np.flatnonzero(np.abs(x) > self.threshold)
        start = max(0, int(loud[0]) - self.margin) if loud.size else max(0, len(x) - self.margin)
        start = min(start, self.max_drop - self.dropped)  # never drop past the bound
        self.dropped += start
        if loud.size or self.dropped >= self.max_drop:
            self._open = True
            self._held = np.zeros(0, np.float32)
            return x[start:]
        self._held = x[start:]
        return np.zeros(0, np.float32)

    def flush(self) -> np.ndarray:
        """The quiet samples still held (the stream ended before anything audible)."""
        out, self._held = self._held, np.zeros(0, np.float32)
        return out
