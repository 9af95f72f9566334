"""Token sampling: greedy, temperature, top-k, top-p; seeded and reproducible.

numpy only (no torch), so the speculation core can use it: the exact
acceptance rule needs the *processed* distributions of draft and target
(after temperature / top-k / top-p), and the same uniforms that pick a token
here feed ``voicepipe.speculative.accept``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0: greedy
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1: off
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


def probs(logits: np.ndarray, sp: SamplingParams) -> np.ndarray:
    """Processed distribution(s) (…, V) float64 that sampling draws from.

    Greedy gives a one-hot of the argmax (ties: lowest id), so the exact rule
    degenerates to the greedy rule.
    """
    x = np.asarray(logits, dtype=np.float64)
    if sp.greedy:
        out = np.zeros_like(x)
        np.put_along_axis(out, x.argmax(axis=-1)[..., None], 1.0, axis=-1)
        return out
    x = x / sp.temperature
    v = x.shape[-1]
    if 0 < sp.top_k < v:
        kth = np.partition(x, v - sp.top_k, axis=-1)[..., v - sp.top_k : v - sp.top_k + 1]
        x = np.where(x < kth, -np.inf, x)
    x = x - x.max(axis=-1, keepdims=True)
    p = np.exp(x)
    p /= p.sum(axis=-1, keepdims=True)
    if sp.top_p < 1.0:
        order = np.argsort(-p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=-1)
        before = np.cumsum(sorted_p, axis=-1) - sorted_p  # mass strictly above each token
        keep_sorted = before < sp.top_p  # always keeps the most likely token
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=-1)
        p = np.where(keep, p, 0.0)
        p /= p.sum(axis=-1, keepdims=True)
    result: np.ndarray = p
    return result


class Sampler:
    """Draws tokens with its own seeded stream of uniforms."""

    def __init__(self, sp: SamplingParams) -> None:
        self.sp = sp
        self.rng = np.random.default_rng(sp.seed)

    def uniform(self, n: int | None = None) -> np.ndarray | float:
        return float(self.rng.random()) if n is None else self.rng.random(n)

    def sample(self, logits: np.ndarray) -> int:
        """One token from logits (V,)."""
        if self.sp.greedy:
            return int(np.asarray(logits).argmax())
        return draw(probs(logits, self.sp), float(self.rng.random()))


def draw(p: np.ndarray, u: float) -> int:
    """Inverse-CDF draw from a (V,) distribution with uniform u."""
    c = np.cumsum(p)
    return min(int(np.searchsorted(c, u * c[-1], side="right")), int(c.shape[0]) - 1)
