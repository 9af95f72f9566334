"""When a session's voice turn counts as heard or answered."""

from __future__ import annotations

from voicepipe.core.turns.activity import VoiceActivity

S = 1_000_000_000


def test_quiet_until_speech() -> None:
    a = VoiceActivity()
    assert not a.active(0, replies_in_flight=False)
    a.speech_started()
    assert a.active(10 * S, replies_in_flight=False)  # however long the user speaks


def test_the_gap_before_the_final_counts_but_is_bounded() -> None:
    a = VoiceActivity(final_wait_ns=S)
    a.speech_started()
    a.speech_ended(5 * S)
    assert a.active(5 * S + S // 2, replies_in_flight=False)  # the final decode runs
    assert not a.active(6 * S, replies_in_flight=False)  # a cough: no final ever came


def test_the_final_hands_over_to_the_reply() -> None:
    a = VoiceActivity()
    a.speech_started()
    a.speech_ended(S)
    a.final_heard()
    assert a.active(S, replies_in_flight=True)
    assert not a.active(S, replies_in_flight=False)  # the reply ended: nothing left


def test_speech_again_restarts_the_hearing() -> None:
    a = VoiceActivity(final_wait_ns=S)
    a.speech_started()
    a.speech_ended(0)
    a.speech_started()
    assert a.active(100 * S, replies_in_flight=False)
