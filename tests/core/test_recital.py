"""A reply reciting its tools (core/recital.py): caught before a word of it is said."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voicepipe.core.recital import RecitalGuard

NAMES = ["set_timer", "get_current_time", "calculate"]


def run(text: str, cuts: list[int], hold: int = 4) -> tuple[str, RecitalGuard]:
    g = RecitalGuard(NAMES, hold)
    out, last = "", 0
    for c in sorted({c % (len(text) + 1) for c in cuts}):
        out += g.push(text[last:c])
        last = c
    out += g.push(text[last:])
    return out + g.flush(), g


def test_what_is_watched() -> None:
    g = RecitalGuard(NAMES)
    # one plain word ("calculate") cannot be told from speech
    assert g.forms == ("get_current_time", "getcurrenttime", "set_timer", "settimer")
    assert RecitalGuard(["calculate"]).push("Call calculate now, please.") == (
        "Call calculate now, please."
    )


def test_a_recital_in_the_first_words_is_never_said() -> None:
    # what the 1.5B said when asked about a gas smell (bench answers, development set)
    text = "Call getcurrenttime to determine the time. If the gas smell is strong, call"
    g = RecitalGuard(NAMES)
    said = "".join(g.push(w) for w in ["Call", " get", "current", "time", " to", " determine"])
    assert said == "" and g.recital and not g.released
    assert g.push(" the time.") == "" and g.flush() == ""  # and stays dropped
    out, g = run(text, [3, 9, 20])
    assert out == "" and g.recital


def test_a_later_recital_stops_the_speech_where_the_name_begins() -> None:
    text = (
        "To book a table for two, you can call the restaurant. Or call the "
        '"get_current_time" function first.'
    )
    out, g = run(text, list(range(0, len(text), 4)))  # streamed a few characters a delta
    assert g.recital and g.released
    # (the stage speaks only the chunks the TTS already has: up to the restaurant.)
    assert out == 'To book a table for two, you can call the restaurant. Or call the "'


def test_words_that_start_like_a_name_wait_one_token() -> None:
    g = RecitalGuard(NAMES)
    assert g.push("I will get") == ""  # "get" may grow into getcurrenttime
    assert g.push(" you a drink. Set") == "I will get you a drink. "
    assert g.push("tle it down.") == "Settle it down."  # ("Settle" is no name)
    assert g.flush() == ""
    assert not g.recital


def test_the_first_words_wait_no_longer_than_the_chunker() -> None:
    g = RecitalGuard(NAMES, hold_words=4)
    assert g.push("The capital of") == ""
    assert g.push(" France") == ""  # the fourth word may still go on
    assert g.push(" is") == "The capital of France is"
    g = RecitalGuard(NAMES, hold_words=4)
    assert g.push("Yes, it") == "Yes, it"  # a clause mark after a word: the chunker's too


@given(
    st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Zs", "Po")), max_size=60),
    st.lists(st.integers(0, 80), max_size=8),
)
def test_speech_without_a_name_comes_out_whole(text: str, cuts: list[int]) -> None:
    low = text.lower()
    if any(f in low for f in ("settimer", "set_timer", "getcurrenttime", "get_current_time")):
        return
    out, g = run(text, cuts)
    assert out == text and not g.recital
