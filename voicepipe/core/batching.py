"""The LLM batch scheduler's policy: who runs in the next pass, and how far to speculate.

Sans-I/O: no clocks, no threads, no torch. The shell (voicepipe/schedulers/llm_batch.py)
owns the model and the sessions' decoders; it asks this policy what to run at each
step and tells it what each step cost and how many drafts were accepted.

Continuous batching: a session joins the next step after its request arrives and
leaves after the step that ends its reply (or the first step after a barge-in
cancels it); nothing waits for a batch to fill or to drain. Each step runs

- every decoding session's verify rows in one model pass (decode is memory-bound:
  the pass reads the weights once for all rows), and
- one chunk of each of up to ``prefills`` waiting prompts (chunked prefill, round
  robin), in the same pass: a long prompt delays the others' next tokens by one
  chunk per step, never by the whole prompt, and sessions arriving together do not
  wait for each other's prompts one at a time.
- Background prompts (the streaming prefill of words a user is still speaking,
  stages/llm/ahead.py) run only in a step with nothing else to do: no session decodes
  and no reply's prompt waits, so they never delay anyone's next token.

Speculation length. A pass's cost grows with its rows: ``base + per_row · rows``
(fitted to the measured steps), drafting adds ``per_draft`` per drafted token. With
per-draft acceptance ``a`` a row of K drafts emits ``(1 - a^(K+1)) / (1 - a)`` tokens
on average. For B decoding sessions the policy picks the K (0 … k_max) with the most
tokens per second, ``B · E(K) / (base + per_row · B · (K + 1) + per_draft · B · K)``:
with one session the weight read dominates and long drafts pay; as B grows each draft
row costs a larger share of the pass and K falls, to 0 (speculation off) when a draft
row costs more than it is expected to return. Until enough steps are measured the
policy leaves K to each session's own controller (cap None).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

_MIN_STEPS = 8  # measured steps before the cost fit is trusted
_DECAY = 0.98  # weight of older observations (per observation): the load changes


@dataclass
class Plan:
    """One step: the sessions whose verify rows run, and the prompts fed a chunk with them."""

    decode: list[int]
    prefill: list[int]  # session ids
    k_cap: int | None  # drafts per decoding session this step (None: their own choice)


@dataclass
class _Fit:
    """Decayed least squares of step seconds against rows: seconds ≈ base + per_row · rows."""

    n: float = 0.0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0
    count: int = 0

    def add(self, x: float, y: float) -> None:
        d = _DECAY
        self.n = self.n * d + 1.0
        self.sx = self.sx * d + x
        self.sy = self.sy * d + y
        self.sxx = self.sxx * d + x * x
        self.sxy = self.sxy * d + x * y
        self.count += 1

    def line(self) -> tuple[float, float] | None:
        """(base, per_row), or None until the rows seen vary enough to tell them apart."""
        if self.count < _MIN_STEPS:
            return None
        var = self.sxx * self.n - self.sx * self.sx
        if var <= 1e-9 * max(1.0, self.n * self.n):
            return None
        slope = (self.sxy * self.n - self.sx * self.sy) / var
        base = (self.sy - slope * self.sx) / self.n
        if base <= 0.0:  # noise: the pass always reads the weights
            return None
        return base, max(slope, 0.0)


@dataclass
class BatchPolicy:
    """The scheduler's decisions; ``k_max`` bounds the cap, 0 turns speculation off;
    ``prefills``: prompts fed a chunk per step."""

    k_max: int = 8
    prefills: int = 4
    _decoding: list[int] = field(default_factory=list)  # in join order
    _waiting: deque[int] = field(default_factory=deque)  # prompts to prefill, oldest first
    _background: deque[int] = field(default_factory=deque)  # prompts fed only when idle
    _fit: _Fit = field(default_factory=_Fit)
    _drafted: float = 0.0  # decayed drafts and their outcomes (acceptance)
    _trials: float = 0.0
    _accepted: float = 0.0
    _draft_s: float = 0.0  # decayed drafting seconds per drafted token
    _draft_n: float = 0.0

    # ------------------------------------------------------------ sessions

    def join_prefill(self, sid: int, background: bool = False) -> None:
        """``sid`` has a prompt to prefill chunk by chunk (``background``: only in steps
        that have nothing else to run)."""
        queue = self._background if background else self._waiting
        if sid not in queue:
            queue.append(sid)

    def prefill_done(self, sid: int) -> None:
        if sid in self._waiting:
            self._waiting.remove(sid)
        if sid in self._background:
            self._background.remove(sid)

    def join_decode(self, sid: int) -> None:
        if sid not in self._decoding:
            self._decoding.append(sid)

    def leave(self, sid: int) -> None:
        """A reply ended or was cancelled: out of every queue before the next step."""
        self.prefill_done(sid)
        if sid in self._decoding:
            self._decoding.remove(sid)

    @property
    def idle(self) -> bool:
        return not self._decoding and not self._waiting and not self._background

    # ------------------------------------------------------------ a step

    def plan(self) -> Plan:
        n = min(self.prefills, len(self._waiting))
        prefill = list(self._waiting)[:n]
        self._waiting.rotate(-n)  # round robin: the next step starts with the prompts after
        if not prefill and not self._decoding and self._background:
            prefill = [self._background[0]]  # one background chunk per idle step
            self._background.rotate(-1)
        return Plan(list(self._decoding), prefill, self.k_cap(len(self._decoding)))

    def observe_step(self, rows: int, seconds: float) -> None:
        """A batched verify pass of ``rows`` rows took ``seconds``."""
        if rows > 0 and seconds > 0:
            self._fit.add(float(rows), seconds)

    def observe_drafts(self, drafted: int, accepted: int) -> None:
        """One session's step: it drafted ``drafted`` tokens, the target accepted the
        first ``accepted``."""
        if drafted <= 0:
            return
        d = _DECAY
        self._drafted = self._drafted * d + drafted
        self._accepted = self._accepted * d + accepted
        # Each accepted draft is a success; the first rejection (if any) ends the trials.
        self._trials = self._trials * d + accepted + (1 if accepted < drafted else 0)

    def observe_draft_time(self, drafted: int, seconds: float) -> None:
        """Drafting ``drafted`` tokens took one session ``seconds``."""
        if drafted > 0 and seconds > 0:
            self._draft_s = self._draft_s * _DECAY + seconds
            self._draft_n = self._draft_n * _DECAY + drafted

    @property
    def acceptance(self) -> float | None:
        """Per-draft acceptance probability (each draft accepted given the ones before)."""
        if self._trials < 4:
            return None
        return self._accepted / self._trials

    def k_cap(self, batch: int) -> int | None:
        """The drafts per session for a step of ``batch`` decoding sessions (None: not
        enough measured yet, each session's controller decides alone)."""
        if self.k_max <= 0:
            return 0
        line = self._fit.line()
        a = self.acceptance
        if line is None or a is None or batch <= 0:
            return None
        base, per_row = line
        per_draft = self._draft_s / self._draft_n if self._draft_n > 0 else 0.0
        best_k, best = 0, 0.0
        for k in range(self.k_max + 1):
            tokens = batch * expected_tokens(a, k)
            cost = base + per_row * batch * (k + 1) + per_draft * batch * k
            if tokens / cost > best * (1.0 + 1e-9):
                best_k, best = k, tokens / cost
        return best_k


def expected_tokens(a: float, k: int) -> float:
    """Tokens a row of ``k`` drafts emits on average at per-draft acceptance ``a``: the
    accepted prefix plus the target's own next token."""
    if a >= 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)
