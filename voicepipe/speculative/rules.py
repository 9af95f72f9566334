"""Acceptance rules as objects, built from config (docs/DESIGN.md §6).

Each rule wraps one pure function of ``spec.accept`` with its parameters and
the sampling math it needs (the target's processed distribution), and draws
its uniforms from the generator it is given, so a seeded run is reproducible
and tests are exact. ``verify`` with zero drafts is a plain decoding step: the
rule's own choice of the next token (argmax, or a sample at its temperature).

- ``Greedy``: accept while the draft is the target's argmax (token-identical
  to greedy decoding).
- ``Exact``: Leviathan/Chen speculative sampling, output ~ the target.
- ``Relaxed(beta)``: accept while u < min(1, q/p) + beta.
- ``TopK(k)``: accept while the draft is among the target's k likeliest.
- ``Acoustic(beta, distance)``: accept while the draft's codebook vector lies
  within beta of the target's choice (codec tokens only).

A greedy target (temperature 0) has no distribution to relax: ``Exact`` and
``Relaxed`` then verify greedily.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from voicepipe.speculative import accept
from voicepipe.speculative.sampling import SamplingParams, probs
from voicepipe.speculative.types import Scores

NAMES = ("greedy", "exact", "relaxed", "topk", "acoustic")


class Rule(Protocol):
    @property
    def name(self) -> str: ...

    def verify(
        self, drafts: list[int], p: np.ndarray | None, scores: Scores, rng: np.random.Generator
    ) -> accept.Accept:
        """Keep a prefix of ``drafts`` (draft distributions ``p``, or None for a
        deterministic drafter) against the target's K+1 rows; the next token."""
        ...


def _soft(sp: SamplingParams) -> SamplingParams:
    """Tolerance rules rank or compare the target's choices even at temperature 0: a
    near-zero temperature keeps the argmax and gives every token a rank."""
    return SamplingParams(max(sp.temperature, 1e-3), sp.top_k, sp.top_p, sp.seed)


@dataclass(frozen=True)
class Greedy:
    name: str = field(default="greedy", init=False)

    def verify(
        self, drafts: list[int], p: np.ndarray | None, scores: Scores, rng: np.random.Generator
    ) -> accept.Accept:
        return accept.greedy(np.asarray(drafts, dtype=np.int64), scores.logits, scores.best)


@dataclass(frozen=True)
class Relaxed:
    beta: float = 0.0
    sampling: SamplingParams = SamplingParams()
    name: str = field(default="relaxed", init=False)

    def verify(
        self, drafts: list[int], p: np.ndarray | None, scores: Scores, rng: np.random.Generator
    ) -> accept.Accept:
        d = np.asarray(drafts, dtype=np.int64)
        if self.sampling.greedy:
            return accept.greedy(d, scores.logits, scores.best)
        q = probs(scores.logits, self.sampling)
        return accept.relaxed(d, p, q, rng.random(len(d)), float(rng.random()), self.beta)


@dataclass(frozen=True)
class Exact(Relaxed):
    """``Relaxed`` with no tolerance: the output is distributed as the target's."""

    name: str = field(default="exact", init=False)

    def __post_init__(self) -> None:
        if self.beta != 0.0:
            raise ValueError("the exact rule has no tolerance (use Relaxed)")


@dataclass(frozen=True)
class TopK:
    k: int = 3
    sampling: SamplingParams = SamplingParams()
    name: str = field(default="topk", init=False)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError("top-k tolerance needs k >= 1")

    def verify(
        self, drafts: list[int], p: np.ndarray | None, scores: Scores, rng: np.random.Generator
    ) -> accept.Accept:
        q = probs(scores.logits, _soft(self.sampling))
        u = None if self.sampling.greedy else float(rng.random())
        return accept.top_k(np.asarray(drafts, dtype=np.int64), q, self.k, u)


@dataclass(frozen=True)
class Acoustic:
    beta: float
    distance: accept.Distance
    sampling: SamplingParams = SamplingParams()
    name: str = field(default="acoustic", init=False)

    def verify(
        self, drafts: list[int], p: np.ndarray | None, scores: Scores, rng: np.random.Generator
    ) -> accept.Accept:
        d = np.asarray(drafts, dtype=np.int64)
        q = probs(scores.logits, _soft(self.sampling))
        u = None if self.sampling.greedy else rng.random(len(d) + 1)
        return accept.acoustic(d, q, self.distance, self.beta, u)


def for_sampling(sampling: SamplingParams) -> Rule:
    """The rule that keeps a sampled target's output distribution: greedy or exact."""
    return Greedy() if sampling.greedy else Exact(sampling=sampling)


def from_config(
    name: str,
    *,
    beta: float = 0.0,
    top_k: int = 3,
    sampling: SamplingParams | None = None,
    distance: accept.Distance | None = None,
) -> Rule:
    """A rule by its config name ([tts] rule, beta, top_k, temperature)."""
    sampling = sampling or SamplingParams()
    if name == "greedy":
        return Greedy()
    if name == "exact":
        return Exact(sampling=sampling)
    if name == "relaxed":
        return Relaxed(beta=beta, sampling=sampling)
    if name == "topk":
        return TopK(k=top_k, sampling=sampling)
    if name == "acoustic":
        if distance is None:
            raise ValueError("the acoustic rule needs a codebook distance")
        return Acoustic(beta=beta, distance=distance, sampling=sampling)
    raise ValueError(f"unknown rule {name!r}; one of {', '.join(NAMES)}")
