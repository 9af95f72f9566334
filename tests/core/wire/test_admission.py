"""Admission control: pending pool separate from sessions, eviction of the oldest, deadlines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.core.wire.admission import Admission, Limits, Refusal

S = 1_000_000_000


def _adm(**kw: int) -> Admission:
    return Admission(Limits(**kw))


def test_idle_sockets_never_take_a_session_slot() -> None:
    a = _adm(max_sessions=8, max_pending=64, max_pending_per_address=16)
    idle = [a.connect("10.0.0.9")[0] for _ in range(8)]
    honest, evicted = a.connect("10.0.0.9")
    assert evicted == []
    assert a.hello(honest) is None
    assert a.sessions == 1 and a.pending == 8
    assert all(not t.session for t in idle)


def test_address_at_its_cap_loses_its_own_oldest_pending() -> None:
    a = _adm(max_pending=10, max_pending_per_address=2)
    other = a.connect("1.1.1.1")[0]
    first = a.connect("6.6.6.6")[0]
    second = a.connect("6.6.6.6")[0]
    third, evicted = a.connect("6.6.6.6")
    assert evicted == [first] and first.closed
    assert a.pending_of("6.6.6.6") == 2 and not other.closed
    assert a.pending == 3 and not (other.closed or second.closed or third.closed)


def test_full_pool_evicts_the_oldest_of_anyone() -> None:
    a = _adm(max_pending=3, max_pending_per_address=3)
    t = [a.connect(f"10.0.0.{i}")[0] for i in range(3)]
    new, evicted = a.connect("10.0.0.99")
    assert evicted == [t[0]] and a.pending == 3
    assert a.hello(new) is None


def test_too_many_sessions_only_when_sessions_are_full() -> None:
    a = _adm(max_sessions=1)
    t1 = a.connect("a")[0]
    t2 = a.connect("a")[0]
    assert a.hello(t1) is None
    assert a.hello(t2) is Refusal.SESSIONS_FULL
    assert a.pending == 1  # refused stays pending until the caller closes it
    a.close(t2)
    a.close(t1)
    assert a.sessions == 0 and a.pending == 0
    t3 = a.connect("a")[0]
    assert a.hello(t3) is None


def test_sessions_per_address() -> None:
    a = _adm(max_sessions=8, max_sessions_per_address=1)
    assert a.hello(a.connect("a")[0]) is None
    assert a.hello(a.connect("a")[0]) is Refusal.ADDRESS_FULL
    assert a.hello(a.connect("b")[0]) is None


def test_a_closed_or_promoted_ticket_cannot_say_hello_again() -> None:
    a = _adm()
    t = a.connect("a")[0]
    assert a.hello(t) is None
    with pytest.raises(ValueError):
        a.hello(t)
    a.close(t)
    a.close(t)  # idempotent
    assert a.sessions == 0


def test_bad_limits() -> None:
    with pytest.raises(ValueError):
        Limits(max_pending=0)
    with pytest.raises(ValueError):
        Limits(max_sessions_per_address=-1)


_ops = st.lists(
    st.tuples(
        st.sampled_from(["connect", "hello", "close"]),
        st.integers(0, 3),
        st.integers(0, 50),
    ),
    max_size=200,
)


@settings(max_examples=200, deadline=None)
@given(
    ops=_ops,
    max_sessions=st.integers(1, 4),
    max_pending=st.integers(1, 6),
    per_addr=st.integers(1, 6),
)
def test_counts_stay_consistent_under_any_sequence(
    ops, max_sessions, max_pending, per_addr
) -> None:
    a = _adm(
        max_sessions=max_sessions,
        max_pending=max_pending,
        max_pending_per_address=per_addr,
    )
    live: list = []
    for op, addr, pick in ops:
        if op == "connect":
            t, evicted = a.connect(f"10.0.0.{addr}")
            assert all(e.closed and not e.session for e in evicted)
            live.append(t)
        elif live:
            t = live[pick % len(live)]
            if op == "hello" and not t.closed and not t.session:
                a.hello(t)
            elif op == "close":
                a.close(t)
        open_ = [t for t in live if not t.closed]
        assert a.sessions == sum(t.session for t in open_) <= max_sessions
        assert a.pending == sum(not t.session for t in open_) <= max_pending
        for i in range(4):
            addr = f"10.0.0.{i}"
            assert (
                a.pending_of(addr)
                == sum(not t.session and t.address == addr for t in open_)
                <= per_addr
            )
