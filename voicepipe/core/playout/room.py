"""A loudspeaker heard by the microphone: the echo path of a speakerphone, simulated. Sans-I/O.

What the client's speaker plays (at the output rate) comes back into its microphone (at the
input rate) attenuated by ``gain_db``, ``delay_ms`` later, smeared by a room's impulse
response: a direct path plus exponentially decaying reflections (``room_ir``). The headless
client feeds every block it plays to ``played`` and adds ``take(n)`` to every microphone
block it sends, so the server hears its own voice as it would through a laptop's speakers
(``voicepipe bench turns``, echo situations).
"""

from __future__ import annotations

import numpy as np


def room_ir(
    sample_rate: int, rt60_ms: float = 250.0, length_ms: float = 120.0, seed: int = 0
) -> np.ndarray:
    """A short synthetic room impulse response: the direct path (1.0 at t=0) and a tail of
    random reflections decaying by 60 dB over ``rt60_ms``, normalised to unit energy."""
    if sample_rate <= 0 or rt60_ms <= 0 or length_ms <= 0:
        raise ValueError("sample_rate, rt60_ms and length_ms must be > 0")
    n = max(1, round(sample_rate * length_ms / 1000))
    t = np.arange(n) / sample_rate
    rng = np.random.default_rng(seed)
    tail = rng.standard_normal(n) * 10 ** (-3.0 * t / (rt60_ms / 1000)) * 0.3
    # Reflections start after ~3 ms (the nearest wall); the direct path is the first tap.
    tail[: max(1, round(sample_rate * 0.003))] = 0.0
    ir = tail
    ir[0] = 1.0
    out: np.ndarray = (ir / np.sqrt(np.sum(ir**2))).astype(np.float32)
    return out


class EchoPath:
    """Speaker → room → microphone, block by block."""

    def __init__(
        self,
        *,
        gain_db: float,
        delay_ms: float,
        in_rate: int,
        out_rate: int,
        ir: np.ndarray | None = None,
    ) -> None:
        if in_rate <= 0 or out_rate <= 0 or delay_ms < 0:
            raise ValueError("rates must be > 0 and delay_ms >= 0")
        self.gain = float(10 ** (gain_db / 20))
        self.in_rate, self.out_rate = in_rate, out_rate
        self.ir = (
            room_ir(in_rate) if ir is None else np.asarray(ir, np.float32).reshape(-1)
        ).astype(np.float64)
        # The delay: silence already in the line when the first block is played.
        self._line = np.zeros(round(in_rate * delay_ms / 1000), np.float64)
        self._tail = np.zeros(len(self.ir) - 1, np.float64)  # reverberation still to come
        self._ir_fft: dict[int, np.ndarray] = {}  # the response's spectrum, by FFT size
        self._phase = 0.0  # resampling position carried between blocks (in output samples)
        self._last = 0.0  # the previous block's last sample, for interpolation across blocks
        self.played_s = 0.0

    def played(self, pcm: np.ndarray) -> None:
        """A block the speaker played (float32 at the output rate)."""
        if not np.issubdtype(np.asarray(pcm).dtype, np.floating):
            # int16 samples taken as floats would come back 90 dB too loud, clipped
            raise TypeError(f"played() takes float audio in [-1, 1], got {np.asarray(pcm).dtype}")
        x = np.asarray(pcm, np.float64).reshape(-1)
        if not len(x):
            return
        self.played_s += len(x) / self.out_rate
        # Linear-interpolation resampling, continuous across blocks: positions (in output
        # samples, -1 being the previous block's last) at which the mic's samples fall.
        step = self.out_rate / self.in_rate
        pos = np.arange(self._phase, len(x) - 1 + 1e-9, step)
        src = np.concatenate([[self._last], x])
        y = np.interp(pos + 1, np.arange(len(src)), src)
        self._phase = (pos[-1] + step - len(x)) if len(pos) else self._phase - len(x)
        self._last = float(x[-1])
        if not len(y):
            return
        # Overlap-add: len(wet) = len(y) + len(ir) - 1 >= len(tail), always. By FFT: a
        # 120 ms response at 48 kHz is 5,760 taps, too slow directly for a 10 ms block
        # on a busy core (the client's speaker loop would fall behind real time).
        m = len(y) + len(self.ir) - 1
        nfft = 1 << (m - 1).bit_length()
        spec = self._ir_fft.get(nfft)
        if spec is None:
            spec = self._ir_fft[nfft] = np.fft.rfft(self.ir, nfft)
        wet = np.fft.irfft(np.fft.rfft(y, nfft) * spec, nfft)[:m]
        wet[: len(self._tail)] += self._tail
        self._tail = wet[len(y) :].copy()
        self._line = np.concatenate([self._line, self.gain * wet[: len(y)]])

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` samples the microphone hears of the speaker (silence when the
        speaker has not played that far: the two clocks run side by side)."""
        out = np.zeros(n, np.float32)
        k = min(n, len(self._line))
        out[:k] = self._line[:k]
        self._line = self._line[k:]
        return out
