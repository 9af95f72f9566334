"""Time-scale modification on PCM16 for the playout buffer: pitch search, accelerate,
stretch, concealment and cross-fades.

Every decision here is made on exact integer arithmetic (int16 products summed in
int64 stay below 2**53), and every output sample is ``floor(x + 0.5)`` of a value
built from single IEEE-754 operations in a fixed order. That is what lets the
JavaScript port in ``web/jitter.js`` produce bit-identical audio, which the shared
vectors in ``tests/data/jitter_vectors.json`` check.
"""

from __future__ import annotations

import math

import numpy as np


def to_int16(x: np.ndarray) -> np.ndarray:
    """Round half up and saturate: the one rounding rule both implementations use."""
    return np.clip(np.floor(x + 0.5), -32768, 32767).astype(np.int16)


def best_lag(x: np.ndarray, lo: int, hi: int, w: int, silence_energy: int) -> tuple[int, float]:
    """The lag T in [lo, hi] whose window x[T:T+w] best matches x[0:w].

    Returns (T, normalised correlation). A quiet window (energy below
    ``silence_energy``) returns (hi, 1.0): any splice point is inaudible there, and
    the longest one removes or adds the most time. ``len(x) >= hi + w``.
    """
    x64 = x[: hi + w].astype(np.int64)
    seg = x64[:w]
    e0 = int(np.dot(seg, seg))
    if e0 < silence_energy:
        return hi, 1.0
    corr = np.correlate(x64[lo : hi + w], seg, mode="valid")  # (hi-lo+1,) exact ints
    sq = np.concatenate(([0], np.cumsum(x64 * x64)))
    e_t = sq[lo + w : hi + w + 1] - sq[lo : hi + 1]
    denom = np.sqrt(float(e0) * e_t.astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = np.where(e_t > 0, corr.astype(np.float64) / denom, 0.0)
    i = int(np.argmax(norm))  # first maximum: the JS loop keeps the first one too
    return lo + i, float(norm[i])


def crossfade(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Fade from ``a`` to ``b`` (same length L) with weights (i+1)/(L+1)."""
    n = len(a)
    w = np.arange(1, n + 1, dtype=np.float64) / float(n + 1)
    return to_int16(a.astype(np.float64) * (1.0 - w) + b.astype(np.float64) * w)


def accelerate(x: np.ndarray, t: int) -> np.ndarray:
    """Remove one period: 2T input samples → T output samples."""
    return crossfade(x[:t], x[t : 2 * t])


def stretch(x: np.ndarray, t: int) -> np.ndarray:
    """Add one period: T input samples → 2T output samples (x[0:T], then a period that
    fades from x[T:2T] back to x[0:T], so that x[T:] follows seamlessly)."""
    return np.concatenate((x[:t].astype(np.int16), crossfade(x[t : 2 * t], x[:t])))


def conceal(hist: np.ndarray, period: int, k0: int, n: int, fade: int) -> np.ndarray:
    """Samples k0..k0+n-1 of a concealment: the last ``period`` samples of ``hist``
    repeated, with a gain falling linearly from 1 to 0 over ``fade`` samples."""
    if period <= 0 or len(hist) == 0 or k0 >= fade:
        return np.zeros(n, dtype=np.int16)
    k = np.arange(k0, k0 + n, dtype=np.int64)
    base = hist[len(hist) - period + (k % period)].astype(np.float64)
    gain = np.maximum(0.0, 1.0 - k.astype(np.float64) / float(fade))
    return to_int16(base * gain)


def period_of(hist: np.ndarray, lo: int, hi: int, w: int, silence_energy: int) -> int:
    """Pitch period of the end of ``hist`` (searched backwards from its last sample)."""
    if len(hist) < hi + w:
        return min(len(hist), hi)
    t, _ = best_lag(hist[::-1], lo, hi, w, silence_energy)
    return t


def ms_to_samples(ms: float, sr: int) -> int:
    return int(math.floor(ms * sr / 1000.0))
