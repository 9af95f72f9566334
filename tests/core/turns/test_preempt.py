"""Preemptive generation decisions (core/turns/preempt.py): start, commit, cancel."""

from __future__ import annotations

import pytest

from voicepipe.core.turns.preempt import Decision, Preemption, agrees


@pytest.mark.parametrize(
    ("stable", "final", "same"),
    [
        ("What is two plus three", "What is two plus three?", True),
        ("what is 2 plus 3?", "What is two plus three?", True),  # numbers spelled alike
        ("Why is the sky blue?", "Why is the sky blue today?", False),  # the user said more
        ("Turn on the lights.", "Turn off the lights.", False),
        ("", "", False),  # nothing to answer
        ("...", "Hello.", False),
    ],
)
def test_agrees_compares_words_not_punctuation(stable: str, final: str, same: bool) -> None:
    assert agrees(stable, final) is same


def test_agreeing_final_commits_and_counts_kept() -> None:
    p = Preemption()
    assert p.on_stable(3, "Why is the sky blue") == Decision(start="Why is the sky blue")
    assert p.on_final(3, "Why is the sky blue?") == Decision(commit=True)
    assert (p.kept, p.cancelled, p.turn) == (1, 0, None)
    # The next final of a turn without a tentative reply takes the normal path.
    assert p.on_final(4, "Thanks.").noop


def test_differing_final_cancels_then_normal_path() -> None:
    p = Preemption()
    p.on_stable(1, "Set a timer")
    assert p.on_final(1, "Set a timer for five minutes.") == Decision(cancel=1)
    assert (p.kept, p.cancelled, p.turn) == (0, 1, None)


def test_speech_resumed_cancels_and_a_new_stable_restarts() -> None:
    p = Preemption()
    p.on_stable(2, "Tell me")
    assert p.on_resumed(2) == Decision(cancel=2)
    assert p.on_resumed(2).noop  # nothing left to cancel
    assert p.on_stable(2, "Tell me a joke") == Decision(start="Tell me a joke")
    assert p.on_final(2, "Tell me a joke.").commit
    assert (p.kept, p.cancelled) == (1, 1)


def test_same_words_again_keep_the_running_reply_new_words_replace_it() -> None:
    p = Preemption()
    p.on_stable(5, "Hello there")
    assert p.on_stable(5, "hello there.").noop
    assert p.on_stable(5, "Hello there friend") == Decision(cancel=5, start="Hello there friend")
    assert p.cancelled == 1


def test_interrupt_and_cancel_drop_only_what_they_name() -> None:
    p = Preemption()
    p.on_stable(5, "Hello")
    assert p.on_interrupt(5).noop  # Interrupt(5) voids turns older than 5
    assert p.on_cancel(4).noop
    assert p.on_interrupt(6) == Decision(cancel=5)
    p.on_stable(7, "Hi")
    assert p.on_cancel(7) == Decision(cancel=7)
    assert p.turn is None


def test_disabled_never_starts_and_empty_text_is_ignored() -> None:
    assert Preemption(enabled=False).on_stable(1, "Hello").noop
    p = Preemption()
    assert p.on_stable(1, "  ").noop
    assert p.on_final(1, "Hello").noop
