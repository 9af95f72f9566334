"""Seeded, sans-I/O fault schedules: order, bounds, stalls."""

from __future__ import annotations

import pytest

from voicepipe.core.playout.faults import FaultSchedule, FaultSpec, paced_send_times

MS = 1_000_000


def test_jitter_stays_in_bounds_and_order_is_kept() -> None:
    sched = FaultSchedule(FaultSpec(delay_ms=40, jitter_ms=20, seed=3), 0)
    sends = [i * 20 * MS for i in range(500)]
    out = [sched.release_ns(t) for t in sends]
    assert out == sorted(out)  # TCP never reorders
    delays = [(r - s) / MS for r, s in zip(out, sends, strict=True)]
    assert min(delays) >= 20 and max(delays) <= 60 + 20  # order can hold one back a frame
    assert 35 <= sum(delays) / len(delays) <= 50
    assert max(delays) - min(delays) > 30  # it really jitters


def test_same_seed_same_schedule_other_seed_differs() -> None:
    def run(seed: int) -> list[int]:
        s = FaultSchedule(FaultSpec(delay_ms=40, jitter_ms=20, seed=seed), 0)
        return [s.release_ns(i * 20 * MS) for i in range(50)]

    assert run(1) == run(1) and run(1) != run(2)


def test_stalls_hold_everything_until_their_end() -> None:
    spec = FaultSpec(delay_ms=10, stall_ms=250, stall_every_s=1)
    sched = FaultSchedule(spec, 5 * MS)
    assert sched.stall_end(500 * MS) is None  # no stall in the first period
    assert sched.stall_end(1005 * MS) == 1255 * MS
    out = [sched.release_ns(i * 20 * MS) for i in range(150)]
    inside = [r for r in out if any(b <= r < e for b, e in sched.stalls_between(0, 4000 * MS))]
    assert inside == []
    # frames sent during the first stall all come out at its end, in one burst
    assert out.count(1255 * MS) >= 12
    assert sched.stalls_between(0, 3100 * MS) == [
        (1005 * MS, 1255 * MS),
        (2005 * MS, 2255 * MS),
        (3005 * MS, 3255 * MS),
    ]


@pytest.mark.parametrize(
    "kw", [dict(delay_ms=-1), dict(delay_ms=10, jitter_ms=20), dict(stall_ms=2000, stall_every_s=1)]
)
def test_bad_specs_are_refused(kw: dict) -> None:
    with pytest.raises(ValueError):
        FaultSpec(**kw)


def test_paced_sender_sends_at_real_time_from_the_reply_start() -> None:
    # like stages/output.Pacer: no burst at the start, whatever the lead
    t = paced_send_times(4, 20, start_ns=7 * MS)
    assert t == [7 * MS, 27 * MS, 47 * MS, 67 * MS]
    # a late producer: each frame goes when made, then the schedule catches up
    late = paced_send_times(4, 20, produce_ns=[0, 500 * MS, 500 * MS, 500 * MS])
    assert late == [0, 500 * MS, 500 * MS, 500 * MS]
    early = paced_send_times(3, 20, produce_ns=[0, 0, 0])
    assert early == [0, 20 * MS, 40 * MS]
