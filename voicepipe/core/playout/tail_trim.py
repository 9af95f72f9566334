"""Shorten the silence a synthesized chunk ends with. Sans-I/O: audio in, audio out.

The voice ends every utterance with silence of its own (hibari's trailing pad, ~400 ms,
which the codec LM reproduces), and a reply is spoken chunk by chunk: the first chunk
often ends mid-sentence ("The moon is approximately | 384,400 kilometers away."), so
the listener heard that pad, and the next chunk's lead-in, as a pause where a speaker
makes none or a short one. Quiet samples after the last audible one are held back
until either more speech comes (then they are sent: a pause inside the chunk is the
voice's own) or the chunk ends (then only ``keep`` of them are sent). Since the TTS
runs faster than real time, holding a pause back does not starve the player.
"""

from __future__ import annotations

import re

import numpy as np

# A chunk that ends a sentence: its last mark (before closing quotes or brackets).
_SENTENCE_END = re.compile(r"[.!?…][\"')\]”’»]*\s*$")


def ends_sentence(text: str) -> bool:
    """Whether a chunk's text ends a sentence (a longer pause follows it than a clause)."""
    return bool(_SENTENCE_END.search(text))


class TailTrim:
    """``push(chunk)`` → what to send now; ``end(keep)`` → the held quiet tail cut to
    ``keep`` samples, when the chunk's audio is complete. A sample is audible above
    ``threshold`` (absolute, in the stream's units). Nothing audible is ever dropped."""

    def __init__(self, threshold: float) -> None:
        if threshold <= 0:
            raise ValueError("threshold must be > 0")
        self.threshold = threshold
        self.dropped = 0  # samples not sent
        self._held = np.zeros(0, np.float32)  # quiet samples after the last audible one

    def push(self, pcm: np.ndarray) -> np.ndarray:
        x = np.concatenate([self._held, np.asarray(pcm, np.float32)])
        loud = np.flatnonzero(np.abs(x) > self.threshold)
        cut = int(loud[-1]) + 1 if loud.size else 0
        self._held = x[cut:]
        return x[:cut]

    def end(self, keep: int) -> np.ndarray:
        """The chunk is over: at most ``keep`` of the held quiet samples (they fade into
        the pause before the next chunk); the rest are dropped."""
        if keep < 0:
            raise ValueError("keep must be >= 0")
        out = self._held[:keep]
        self.dropped += len(self._held) - len(out)
        self._held = np.zeros(0, np.float32)
        return out
