"""The process's thread budget (voicepipe/nn/threads.py): threads only for a call alone."""

from __future__ import annotations

from voicepipe.nn.threads import ThreadBudget


def test_a_call_gets_its_threads_only_alone_and_while_one_session_is_busy() -> None:
    b = ThreadBudget(cores=2)
    with b.claim(2) as n:
        assert n == 2
        with b.claim(2) as m:  # a second call in flight: one thread each from now on
            assert m == 1
    with b.claim(4) as n:
        assert n == 2  # never more than the cores
    with b.busy(), b.busy():  # two sessions mid-reply: their calls take turns on the cores
        with b.claim(2) as n:
            assert n == 1
    with b.busy(), b.claim(2) as n:
        assert n == 2
    assert b.active == 0 and b.sessions == 0 and b.peak == 2


def test_not_adaptive_gives_every_call_what_it_wants() -> None:
    b = ThreadBudget(cores=2)
    b.adaptive = False
    with b.busy(), b.busy(), b.claim(2) as n, b.claim(2) as m:
        assert n == m == 2
