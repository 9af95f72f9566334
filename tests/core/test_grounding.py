"""The built-in tools' grounding rule: which turns' words let a call run."""

import pytest

from voicepipe.core.grounding import RULES, ungrounded


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("calculate", "What is 17 times 23?"),
        ("calculate", "What's forty-two divided by six?"),
        ("calculate", "Add up twelve, thirty and seven."),
        ("calculate", "What's half of a dozen?"),
        ("set_timer", "Set a timer for ten minutes."),
        ("set_timer", "Remind me in an hour to call mum."),
        ("set_timer", "Start a countdown."),
        ("get_current_time", "What time is it?"),
        ("get_current_time", "What's today's date?"),
        ("get_current_time", "Which day of the week is it?"),
    ],
)
def test_a_call_the_words_ask_for_runs(name: str, words: str) -> None:
    assert ungrounded(name, words) is None


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("calculate", "When did the Second World War end?"),  # an ordinal is no operand
        ("calculate", "Who was the first person on the moon?"),
        ("calculate", "Why is someone always late?"),  # "one" inside a word
        ("set_timer", "I burned my finger on the stove. What should I do?"),
        ("set_timer", "Remind me why the sky is blue."),
        ("get_current_time", "How do airplanes stay in the air?"),
    ],
)
def test_a_call_nobody_asked_for_is_refused_with_a_reason(name: str, words: str) -> None:
    why = ungrounded(name, words)
    assert why is not None and why.startswith("not run: ") and "without tools" in why


def test_other_tools_and_turns_without_words_always_run() -> None:
    assert ungrounded("lights_on", "Turn on the lights.") is None  # no rule: not ours
    assert ungrounded("calculate", "") is None  # a reply an API client asked for
    assert set(RULES) == {"calculate", "set_timer", "get_current_time"}
