"""Network fault schedules, sans-I/O and seeded: when does a chunk come out?

The TCP proxy (``voicepipe.netsim``) and the simulated arrival traces (tests,
``voicepipe bench jitter``) share this logic. A WebSocket rides on TCP, so
faults are what TCP turns them into: jitter is uneven but order-preserving
delay, and a lost packet is a stall (head-of-line blocking until the
retransmission) after which everything held back arrives at once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class FaultSpec:
    delay_ms: float = 0.0  # mean one-way delay added to every chunk
    jitter_ms: float = 0.0  # each chunk's delay is uniform in delay ± jitter
    stall_ms: float = 0.0  # length of each stall (nothing gets through)
    stall_every_s: float = 0.0  # period of the stalls; 0 = none
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("delay_ms", "jitter_ms", "stall_ms", "stall_every_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be ≥ 0, got {getattr(self, name)}")
        if self.jitter_ms > self.delay_ms:
            raise ValueError("jitter_ms must not exceed delay_ms (delays cannot be negative)")
        if self.stall_every_s and self.stall_ms >= self.stall_every_s * 1000:
            raise ValueError("stall_ms must be shorter than the stall period")


class FaultSchedule:
    """Release times for chunks of one direction of one connection.

    Stall k covers [start + k·every, start + k·every + stall) for k ≥ 1: the
    first comes one period after ``start_ns``. A chunk is released at its arrival
    plus a random delay, pushed past any stall it falls into, and never before
    the chunk ahead of it (order is preserved, as on TCP).
    """

    def __init__(self, spec: FaultSpec, start_ns: int) -> None:
        self.spec = spec
        self.start_ns = start_ns
        self.rng = random.Random(spec.seed)
        self.last_release_ns = start_ns

    def stall_end(self, t_ns: int) -> int | None:
        """End of the stall covering ``t_ns``, or None."""
        s = self.spec
        if not s.stall_every_s or not s.stall_ms:
            return None
        period = int(s.stall_every_s * 1e9)
        k = (t_ns - self.start_ns) // period
        if k < 1:
            return None
        begin = self.start_ns + k * period
        end = begin + int(s.stall_ms * 1e6)
        return end if begin <= t_ns < end else None

    def release_ns(self, arrival_ns: int) -> int:
        s = self.spec
        d = s.delay_ms + (self.rng.uniform(-s.jitter_ms, s.jitter_ms) if s.jitter_ms else 0.0)
        t = max(arrival_ns + int(d * 1e6), self.last_release_ns)
        end = self.stall_end(t)
        if end is not None:
            t = end
        self.last_release_ns = t
        return t

    def stalls_between(self, a_ns: int, b_ns: int) -> list[tuple[int, int]]:
        """Stall windows that start in [a_ns, b_ns)."""
        s = self.spec
        if not s.stall_every_s or not s.stall_ms:
            return []
        period = int(s.stall_every_s * 1e9)
        out = []
        k = max(1, (a_ns - self.start_ns) // period)
        while self.start_ns + k * period < b_ns:
            begin = self.start_ns + k * period
            if begin >= a_ns:
                out.append((begin, begin + int(s.stall_ms * 1e6)))
            k += 1
        return out


def paced_send_times(
    n_frames: int, frame_ms: float, start_ns: int = 0, produce_ns: list[int] | None = None
) -> list[int]:
    """When the server's pacer (``voicepipe.stages.output.Pacer``) sends each frame of a
    reply whose first frame is due to be sent at ``start_ns``: frame i at start + i·frame,
    or when it was produced if that is later.

    The pacer schedules a reply's first sample to be heard ``output.lead_ms`` after it
    starts and sends every frame that long ahead of its schedule, so it never sends faster
    than real time from a reply's start: the lead only lets a late producer catch up
    without its frames counting as late. (This model used to send the first lead_ms of a
    reply at once, which the pacer never did: it hid reply-start underruns.)
    """
    out = []
    for i in range(n_frames):
        due = start_ns + int(i * frame_ms * 1e6)
        ready = produce_ns[i] if produce_ns is not None else start_ns
        out.append(max(due, ready))
    return out
