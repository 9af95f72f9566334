"""Speculative decoding of codec frames (docs/DESIGN.md §6, §7), sans-I/O.

The codec LM's autoregressive state is the sequence of level-0 codes (see
nn/codec_lm.py), so speculation runs on level 0: the drafter proposes K
level-0 codes, the target scores K+1 positions in one pass, one acceptance
rule of ``core.accept`` decides the accepted prefix and the next code, and
the target's deeper RVQ levels for every emitted frame come from its own
hidden state at that position given the chosen level-0 code (``Scorer.deep``).
Deeper levels are never drafted: they do not feed back into the AR state, so
taking them from the target costs one small head per emitted frame and can
never invalidate later positions.

Rules (``rule``): "greedy" (exact greedy verification), "exact"
(Leviathan/Chen: output ~ target), "relaxed" (u < min(1, q/p) + beta),
"topk" (draft among the target's k most likely codes), "acoustic" (draft's
codebook vector within beta of the target's choice; distances normalised by
the codebook's mean pairwise distance, so beta is unitless).

The drafter and scorer are protocols over numpy arrays; the loop keeps all
bookkeeping (history, adaptive K, statistics) and takes its random numbers
from a seeded generator, so runs are reproducible.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from voicepipe.core import accept


class Drafter(Protocol):
    def propose(self, history: list[int], k: int) -> tuple[np.ndarray, np.ndarray | None]:
        """K level-0 codes following ``history`` and the (K, V) distributions they came
        from (None for a deterministic drafter)."""
        ...


class Scorer(Protocol):
    def score(self, history: list[int], drafts: np.ndarray) -> np.ndarray:
        """(K+1, V) target distributions (or logits for greedy) at positions
        len(history) … len(history)+K, given the drafts as inputs."""
        ...

    def deep(self, offsets: list[int], codes0: list[int]) -> np.ndarray:
        """(N, Q) full codes for the emitted frames at the given offsets of the last
        ``score`` call, levels ≥ 1 from the target given each level-0 code."""
        ...


@dataclass
class AdaptiveK:
    """Raise K while every draft is accepted, lower it when fewer than half are;
    with a low running acceptance speculation is switched off (k = 0) for a while
    and then probed again with a short draft."""

    k: int = 4
    k_min: int = 1
    k_max: int = 8
    adaptive: bool = True
    off_below: float = 0.25
    off_frames: int = 12
    ema: float = 0.6
    _off_left: int = 0

    def current(self) -> int:
        return 0 if self._off_left > 0 else self.k

    def update(self, k_used: int, n_accepted: int) -> None:
        if not self.adaptive:
            return
        if k_used == 0:
            self._off_left = max(0, self._off_left - 1)
            if self._off_left == 0:
                self.k = max(self.k_min, 2)
            return
        self.ema = 0.8 * self.ema + 0.2 * (n_accepted / k_used)
        if n_accepted == k_used:
            self.k = min(self.k_max, self.k + 1)
        elif n_accepted < k_used / 2:
            self.k = max(self.k_min, self.k - 1)
        if self.ema < self.off_below:
            self._off_left = self.off_frames
            self.ema = self.off_below + 0.1


@dataclass
class SpecStats:
    """Counts for one utterance; target_passes counts every target forward (AR or verify)."""

    target_passes: int = 0
    draft_steps: int = 0
    drafts: int = 0  # verification rounds with K ≥ 1
    drafted: int = 0
    accepted: int = 0
    frames: int = 0
    per_position: list[list[int]] = field(default_factory=list)  # [tried, accepted] per slot

    def record(self, k: int, n: int) -> None:
        self.drafts += 1
        self.drafted += k
        self.accepted += n
        while len(self.per_position) < k:
            self.per_position.append([0, 0])
        for i in range(k):
            self.per_position[i][0] += 1
            self.per_position[i][1] += int(i < n)

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def mean_accepted_len(self) -> float:
        """1 + accepted / drafts: frames emitted per verification round."""
        return 1.0 + self.accepted / self.drafts if self.drafts else 1.0

    def to_dict(self) -> dict:
        return {"target_passes": self.target_passes, "draft_steps": self.draft_steps,
                "drafts": self.drafts, "drafted": self.drafted, "accepted": self.accepted,
                "frames": self.frames, "acceptance_rate": self.acceptance_rate,
                "mean_accepted_len": self.mean_accepted_len,
                "acceptance_per_position": [a / t if t else 0.0 for t, a in self.per_position]}


def _probs(x: np.ndarray, temperature: float) -> np.ndarray:
    """Row-wise softmax of logits at a temperature (> 0)."""
    z = np.asarray(x, dtype=np.float64) / temperature
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def verify(rule: str, drafts: np.ndarray, p: np.ndarray | None, logits: np.ndarray,
           rng: np.random.Generator, *, temperature: float, beta: float, top_k: int,
           distance: accept.Distance | None) -> accept.Accept:
    """Apply one acceptance rule to target logits (K+1, V)."""
    k = len(drafts)
    if rule == "greedy" or (temperature <= 0 and rule in ("exact", "relaxed")):
        # A greedy target has no distribution to relax: exact/relaxed degrade to greedy.
        return accept.greedy(drafts, logits)
    if rule in ("exact", "relaxed"):
        q = _probs(logits, temperature)
        return accept.relaxed(drafts, p, q, rng.random(k), float(rng.random()),
                              beta if rule == "relaxed" else 0.0)
    if rule == "topk":
        q = _probs(logits, max(temperature, 1e-3))
        return accept.top_k(drafts, q, top_k, None if temperature <= 0 else float(rng.random()))
    if rule == "acoustic":
        if distance is None:
            raise ValueError("acoustic rule needs a codebook distance")
        q = _probs(logits, max(temperature, 1e-3))
        ut = None if temperature <= 0 else rng.random(k + 1)
        return accept.acoustic(drafts, q, distance, beta, ut)
    raise ValueError(f"unknown rule {rule!r}; one of greedy, exact, relaxed, topk, acoustic")


def decode(drafter: Drafter | None, scorer: Scorer, n_frames: int, *, rule: str = "greedy",
           beta: float = 0.0, top_k: int = 3, temperature: float = 0.0,
           distance: accept.Distance | None = None, k: AdaptiveK | None = None,
           seed: int = 0, stats: SpecStats | None = None) -> Iterator[np.ndarray]:
    """Yield (N, Q) code blocks until n_frames frames are emitted.

    drafter None, or K = 0 from the adaptive controller, means a plain
    autoregressive target step (scores one position with no drafts)."""
    rng = np.random.default_rng(seed)
    ctl = k or AdaptiveK()
    st = stats if stats is not None else SpecStats()
    history: list[int] = []
    while len(history) < n_frames:
        kk = min(ctl.current() if drafter is not None else 0, n_frames - len(history) - 1)
        if kk <= 0:
            logits = scorer.score(history, np.zeros(0, np.int64))
            st.target_passes += 1
            row = logits[0]
            if temperature > 0 and rule not in ("greedy",):
                c = accept.sample_from(_probs(row[None], temperature)[0], float(rng.random()))
            else:
                c = int(np.argmax(row))
            emitted = [c]
            if drafter is not None:
                ctl.update(0, 0)
        else:
            drafts, p = drafter.propose(history, kk)
            st.draft_steps += kk
            drafts = np.asarray(drafts, dtype=np.int64)
            logits = scorer.score(history, drafts)
            st.target_passes += 1
            res = verify(rule, drafts, p, logits, rng, temperature=temperature, beta=beta,
                         top_k=top_k, distance=distance)
            emitted = res.emitted(drafts)
            st.record(kk, res.n_accepted)
            ctl.update(kk, res.n_accepted)
        block = scorer.deep(list(range(len(emitted))), emitted)
        history.extend(emitted)
        st.frames += len(emitted)
        yield block
