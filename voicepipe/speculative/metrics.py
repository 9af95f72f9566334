"""Counters of speculative decoding, the same for text and audio (docs/DESIGN.md §6)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpecMetrics:
    """Counters of one generation (or a sum of several).

    drafts: steps that verified ≥ 1 draft; drafted / accepted: draft tokens
    proposed / kept; by_pos_drafted[i] / by_pos_accepted[i]: steps whose
    position i was proposed / accepted; steps: target passes after prefill;
    target_passes: every target pass (the prompt's, when it chose the first
    token, and each step's); tokens: tokens emitted. A sibling (a draft
    tree's leaf) counts as accepted at its position when taken; siblings /
    sibling_hits: siblings verified / taken. accept_hist[k]: target passes after
    prefill that accepted k draft tokens, passes that verified no draft included in
    accept_hist[0] (there are steps - drafts of those). time_*_ns: wall time inside the
    proposer's ``propose``, the target's ``score`` (model pass), and
    acceptance + rollback.
    """

    drafts: int = 0
    drafted: int = 0
    accepted: int = 0
    steps: int = 0
    target_passes: int = 0
    tokens: int = 0
    siblings: int = 0
    sibling_hits: int = 0
    # Tool calls' fixed tokens fed unverified (speculative/jump.py), and the steps that
    # fed them (each one pass, or none when they ended the turn).
    forced: int = 0
    forced_steps: int = 0
    by_pos_drafted: list[int] = field(default_factory=list)
    by_pos_accepted: list[int] = field(default_factory=list)
    accept_hist: list[int] = field(default_factory=list)
    time_propose_ns: int = 0
    time_score_ns: int = 0
    time_verify_ns: int = 0

    def record(self, n_drafted: int, n_accepted: int) -> None:
        if n_accepted >= len(self.accept_hist):
            self.accept_hist += [0] * (n_accepted + 1 - len(self.accept_hist))
        self.accept_hist[n_accepted] += 1
        if n_drafted == 0:
            return
        self.drafts += 1
        self.drafted += n_drafted
        self.accepted += n_accepted
        grow = n_drafted - len(self.by_pos_drafted)
        if grow > 0:
            self.by_pos_drafted += [0] * grow
            self.by_pos_accepted += [0] * grow
        for i in range(n_drafted):
            self.by_pos_drafted[i] += 1
            self.by_pos_accepted[i] += int(i < n_accepted)

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def mean_accepted_len(self) -> float:
        """Tokens emitted per verifying pass: 1 + accepted / drafts."""
        return 1.0 + self.accepted / self.drafts if self.drafts else 1.0

    @property
    def accept_by_pos(self) -> list[float]:
        return [
            a / d if d else 0.0
            for a, d in zip(self.by_pos_accepted, self.by_pos_drafted, strict=True)
        ]

    def merge(self, o: SpecMetrics) -> None:
        counts = (
            "drafts",
            "drafted",
            "accepted",
            "steps",
            "target_passes",
            "tokens",
            "siblings",
            "sibling_hits",
            "forced",
            "forced_steps",
        )
        for name in counts:
            setattr(self, name, getattr(self, name) + getattr(o, name))
        for name in ("time_propose_ns", "time_score_ns", "time_verify_ns"):
            setattr(self, name, getattr(self, name) + getattr(o, name))
        n = max(len(self.by_pos_drafted), len(o.by_pos_drafted))

        def pad(xs: list[int]) -> list[int]:
            return xs + [0] * (n - len(xs))

        self.by_pos_drafted = [
            a + b for a, b in zip(pad(self.by_pos_drafted), pad(o.by_pos_drafted), strict=True)
        ]
        self.by_pos_accepted = [
            a + b for a, b in zip(pad(self.by_pos_accepted), pad(o.by_pos_accepted), strict=True)
        ]
        h = max(len(self.accept_hist), len(o.accept_hist))
        self.accept_hist = [
            (self.accept_hist[i] if i < len(self.accept_hist) else 0)
            + (o.accept_hist[i] if i < len(o.accept_hist) else 0)
            for i in range(h)
        ]

    def as_dict(self) -> dict[str, float | int | list[float]]:
        hist: list[float] = list(self.accept_hist)  # (counts: ints in the JSON)
        return {
            "drafts": self.drafts,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "steps": self.steps,
            "target_passes": self.target_passes,
            "tokens": self.tokens,
            "siblings": self.siblings,
            "sibling_hits": self.sibling_hits,
            "forced": self.forced,
            "forced_steps": self.forced_steps,
            "acceptance_rate": round(self.acceptance_rate, 4),
            "mean_accepted_len": round(self.mean_accepted_len, 4),
            "accept_by_pos": [round(x, 4) for x in self.accept_by_pos],
            "accept_hist": hist,
            "time_propose_ms": round(self.time_propose_ns / 1e6, 3),
            "time_score_ms": round(self.time_score_ns / 1e6, 3),
            "time_verify_ms": round(self.time_verify_ns / 1e6, 3),
        }
