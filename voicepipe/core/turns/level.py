"""How loud the user speaks: what tells their voice from the residue of the assistant's
echo. Sans-I/O.

Past the echo canceller and the echo gate, what is left of the assistant's voice in the
microphone is quiet but not silent: on the speakerphone of tests/e2e/test_echo.py (echo
at -10 dB, 50 ms, a room) the user spoke at -16 dBFS (the loudest tenth of their 10 ms
frames) and the residue of the reply at -32 to -38 dBFS. The VAD still hears speech in
it, and Whisper makes words of near-silence ("Thank you.", "No.", "I'll let you."), with
a no-speech probability as low as real words' (0.26-0.55 against 0.2-0.43 for "Wait,
stop"): on a busy host, where the canceller's alignment drifts, those words cut the
reply. Their level does not lie: a turn far quieter than the user's own voice, while the
assistant speaks, is the room, not the user (``OverlapConfig.quiet_gap_db``).
"""

from __future__ import annotations

from collections import deque
from statistics import median

import numpy as np

FRAME_MS = 10
# The loudest tenth of the frames: the speech's level, whatever share of pauses it holds.
QUANTILE = 90.0


def speech_level_db(pcm: np.ndarray, rate: int) -> float | None:
    """The level of the speech in ``pcm`` (float samples): the ``QUANTILE`` percentile of
    its 10 ms frames' power, dBFS. None for less than one frame."""
    n = rate * FRAME_MS // 1000
    k = len(pcm) // n if n > 0 else 0
    if k == 0:
        return None
    frames = np.asarray(pcm[: k * n], np.float64).reshape(k, n)
    power = np.mean(frames * frames, axis=1)
    return float(10.0 * np.log10(np.percentile(power, QUANTILE) + 1e-12))


class UserLevel:
    """The user's usual speech level: the median of their last ``keep`` turns' levels
    (turns that were theirs: heard with no reply in flight, or judged an interruption)."""

    def __init__(self, keep: int = 5) -> None:
        if keep < 1:
            raise ValueError("keep must be >= 1")
        self._levels: deque[float] = deque(maxlen=keep)

    def observe(self, level_db: float | None) -> None:
        if level_db is not None:
            self._levels.append(level_db)

    def typical(self) -> float | None:
        """None until one turn was heard."""
        return median(self._levels) if self._levels else None
