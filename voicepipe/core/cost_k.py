"""Draft length for drafters whose every drafted token costs a real fraction of a target step.

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
