"""The TTS batcher's order: earliest run-dry first, nothing far ahead of its playout."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voicepipe.core.tts_schedule import RunDry, Want


def test_a_reply_with_no_audio_goes_before_a_session_with_audio_queued() -> None:
    rd = RunDry(ahead_s=2.0)
    speaking, waiting = Want(1, "a", 0.0), Want(2, "b", 5.0)
    rd.sent("a", now_s=5.0, seconds=1.5)  # a plays until 6.5
    assert rd.order([speaking, waiting]) == [waiting, speaking]
    assert rd.deadline(waiting) == 5.0 and rd.deadline(speaking) == 6.5


def test_a_session_about_to_run_dry_goes_before_a_later_arrival() -> None:
    rd = RunDry()
    rd.sent("a", now_s=10.0, seconds=0.1)  # a runs dry at 10.1
    late = Want(2, "b", 10.2)
    assert rd.order([late, Want(1, "a", 9.0)])[0].session == "a"


def test_audio_sent_after_the_queue_ran_out_plays_from_now() -> None:
    rd = RunDry()
    rd.sent("a", 0.0, 1.0)
    rd.sent("a", 5.0, 1.0)  # the first second had played out by 1.0
    assert rd.deadline(Want(1, "a", 0.0)) == 6.0
    rd.sent("a", 5.5, 2.0)  # queued behind what is still playing
    assert rd.deadline(Want(1, "a", 0.0)) == 8.0


def test_far_ahead_is_not_due_and_says_when_it_will_be() -> None:
    rd = RunDry(ahead_s=2.0)
    rd.sent("a", 0.0, 5.0)  # dry at 5.0
    w = Want(1, "a", 0.0)
    assert rd.due([w], now_s=1.0) == []
    assert rd.wake_s([w]) == 3.0
    assert rd.due([w], now_s=3.0) == [w]
    assert rd.wake_s([]) is None


def test_a_new_text_is_due_from_its_arrival_not_from_old_audio() -> None:
    rd = RunDry()
    rd.sent("a", 0.0, 1.0)  # long played out
    assert rd.deadline(Want(1, "a", 30.0)) == 30.0


def test_stale_sessions_are_forgotten() -> None:
    rd = RunDry()
    for i in range(100):
        rd.sent(i, float(i), 0.5)
    rd.sent("now", 1000.0, 1.0)
    assert len(rd._dry) <= 2


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.floats(0, 100), st.floats(0, 10)), min_size=1, max_size=20
    ),
    st.floats(0, 120),
)
def test_due_is_a_prefix_of_the_order_and_never_skips_the_most_urgent(sends, now) -> None:
    rd = RunDry(ahead_s=1.0)
    for s, t, sec in sorted(sends, key=lambda x: x[1]):
        rd.sent(s, t, sec)
    wants = [Want(i, s, t) for i, (s, t, _) in enumerate(sends)]
    order, due = rd.order(wants), rd.due(wants, now)
    assert due == order[: len(due)]
    assert all(rd.deadline(a) <= rd.deadline(b) for a, b in zip(order, order[1:], strict=False))
    wake = rd.wake_s(wants)
    assert wake is not None and (bool(due) == (wake <= now))
