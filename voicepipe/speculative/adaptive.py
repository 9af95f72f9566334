"""How many tokens to draft per step: ``AdaptiveK`` (count-based) and ``CostAwareK``.

Both count tokens instead of timing them, so the choice is deterministic on a
busy machine, and both switch speculation off where it does not pay and probe
again later. ``AdaptiveK`` suits drafters whose drafts cost (almost) nothing
(prompt lookup, the reply store, EAGLE heads, the codec LM's small draft);
``CostAwareK`` suits draft *models* that pay a step of their own per token.

Draft length for drafters whose every drafted token costs a real fraction of a target step.

A draft *model* (e.g. Qwen2.5-Coder 0.5B for the 1.5B) pays one of its own
decode steps per drafted token: about its share of the target's weight bytes
(about a third for that pair: docs/BENCHMARKS.md, cost-aware K). AdaptiveK's grow-on-success
rule ignores that price and drafted 2-4 tokens where the second was accepted
under half the time, each costing a third of a target step.

CostAwareK keeps, per draft position, a moving estimate of the chance a
drafted token is accepted once the ones before it were, and picks the K that
maximizes expected tokens per unit of cost:

    tokens(K) = 1 + Σ_{i≤K} Π_{j≤i} a_j
    cost(K)   = 1 + K · (row_cost + draft_cost)      (in one-row target decodes)

It pauses speculation (like AdaptiveK) when even the best K is below plain
decoding's 1 token per decode. Counting tokens, not timing them, keeps the
choice deterministic on a busy machine. Same interface as AdaptiveK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol


class KController(Protocol):
    """Chooses K before each step (0: a plain step) and learns from its outcome."""

    off_steps: int

    def next_k(self) -> int: ...

    def update(self, n_drafted: int, n_accepted: int) -> None: ...


@dataclass
class AdaptiveK:
    """Chooses K per step from how the last drafts fared; pauses where drafting does not pay.

    After each step that drafted: K grows by one when every draft was accepted and
    shrinks by one when fewer than ``shrink_below`` of them were. A moving average
    (weight ``ema_keep`` on the past) of ``measure`` — drafts accepted per step
    ("accepted"), or their share ("share") — falling under ``pause_below`` pauses
    speculation for ``cooldown`` plain steps, after which it probes again (with
    ``resume_k`` drafts when set). ``for_text`` and ``for_codec`` are the two
    tunings in use.
    """

    k: int = 4
    k_min: int = 1
    k_max: int = 8
    adaptive: bool = True
    shrink_below: float = 1.0
    measure: Literal["accepted", "share"] = "accepted"
    ema_keep: float = 0.7
    ema_start: float | None = None  # None: the first step's value
    pause_below: float = 0.5
    cooldown: int = 8
    ema_after_pause: float | None = None  # None: judge afresh when probing again
    resume_k: int = 0  # 0: keep K across a pause
    off_steps: int = 0
    ema: float | None = None

    def __post_init__(self) -> None:
        self.k = max(self.k_min, min(self.k, self.k_max))
        self.ema = self.ema_start

    @classmethod
    def for_text(
        cls, k: int, *, k_max: int = 8, adaptive: bool = True, verify_cost: float = 1.5
    ) -> AdaptiveK:
        """LLM drafts: verifying K+1 positions costs about ``verify_cost`` one-token
        decodes (memory-bound: the weights are read once), so a step pays when it
        accepts more than ``verify_cost - 1`` drafts; any rejection shrinks K."""
        return cls(k, k_max=k_max, adaptive=adaptive, pause_below=verify_cost - 1.0)

    @classmethod
    def for_codec(cls, k: int, *, k_max: int = 8, adaptive: bool = True) -> AdaptiveK:
        """Codec-LM drafts under tolerance rules: K shrinks only when fewer than half
        pass; a share of accepted drafts averaging under 0.25 pauses for 12 frames,
        then probing resumes at K = 2."""
        return cls(
            k,
            k_max=k_max,
            adaptive=adaptive,
            shrink_below=0.5,
            measure="share",
            ema_keep=0.8,
            ema_start=0.6,
            pause_below=0.25,
            cooldown=12,
            ema_after_pause=0.35,
            resume_k=2,
        )

    def next_k(self) -> int:
        if self.off_steps > 0:
            self.off_steps -= 1
            if self.off_steps == 0 and self.resume_k:
                self.k = max(self.k_min, self.resume_k)
            return 0
        return self.k

    def update(self, n_drafted: int, n_accepted: int) -> None:
        if n_drafted == 0 or not self.adaptive:
            return
        if n_accepted == n_drafted:
            self.k = min(self.k_max, self.k + 1)
        elif n_accepted < self.shrink_below * n_drafted:
            self.k = max(self.k_min, self.k - 1)
        x = n_accepted if self.measure == "accepted" else n_accepted / n_drafted
        old = self.ema
        self.ema = x if old is None else self.ema_keep * old + (1.0 - self.ema_keep) * x
        if self.ema < self.pause_below:
            self.off_steps = self.cooldown
            self.ema = self.ema_after_pause


class CostAwareK:
    """row_cost: an extra verified row in target decodes, read off bench llm's
    verify_cost for the fused kernel up to 6 rows (docs/BENCHMARKS.md); 7-9 rows
    cost more than the line says, which only makes this choose long drafts a
    little too readily on text that copies."""

    def __init__(
        self,
        draft_cost: float,
        row_cost: float = 0.07,
        k_max: int = 8,
        prior: float = 0.6,
        decay: float = 0.9,
        cooldown: int = 8,
    ) -> None:
        if draft_cost < 0 or row_cost < 0:
            raise ValueError("costs must be >= 0")
        self.draft_cost, self.row_cost = draft_cost, row_cost
        self.k_max = max(1, k_max)
        self.decay, self.cooldown = decay, cooldown
        # a[i]: chance that draft position i + 1 is accepted, given the ones before were.
        self.a = [prior] * self.k_max
        # A position never judged yet borrows the estimate of the one before it:
        # a fixed prior there kept K from ever growing past what the prior allowed
        # (on copied text a 0.5B draft stayed at K = 2 while 0.99 of its guesses held).
        self.seen = [False] * self.k_max
        self.off_steps = 0

    def estimates(self) -> list[float]:
        out: list[float] = []
        for i in range(self.k_max):
            out.append(self.a[i] if self.seen[i] or i == 0 else out[-1])
        return out

    def rate(self, k: int, est: list[float] | None = None) -> float:
        """Expected tokens per one-row decode of a pass that drafts k tokens."""
        tokens, reach = 1.0, 1.0
        for a in (est or self.estimates())[:k]:
            reach *= a
            tokens += reach
        return tokens / (1.0 + k * (self.row_cost + self.draft_cost))

    def best_k(self) -> int:
        est = self.estimates()  # once per choice, not once per candidate K
        return max(range(1, self.k_max + 1), key=lambda k: (self.rate(k, est), -k))

    def next_k(self) -> int:
        if self.off_steps > 0:
            self.off_steps -= 1
            return 0
        return self.best_k()

    def update(self, n_drafted: int, n_accepted: int) -> None:
        if n_drafted == 0:
            return
        # Positions 1..n_accepted were accepted; n_accepted + 1 (if drafted) was the miss.
        d = self.decay
        est = self.estimates()
        for i in range(min(n_drafted, n_accepted + 1, self.k_max)):
            old = self.a[i] if self.seen[i] else est[i]
            self.a[i] = d * old + (1.0 - d) * (1.0 if i < n_accepted else 0.0)
            self.seen[i] = True
        if self.rate(self.best_k()) < 1.0:  # no K beats plain decoding: probe again later
            self.off_steps = self.cooldown
