"""The overlap judge: backchannels and echo go on, interruptions cancel (core/turns/overlap.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicepipe.core.turns.overlap import (
    BACKCHANNEL_WORDS,
    OverlapConfig,
    OverlapJudge,
    Verdict,
    classify,
    is_backchannel,
    words_of,
)

CFG = OverlapConfig()
REPLY = "The capital of France is Paris, a city of about two million people on the Seine."


@pytest.mark.parametrize(
    "text",
    ["Mm-hmm.", "Uh-huh.", "Yeah.", "yeah yeah", "Right.", "Okay.", "OK!", "I see.", "Got it.",
     "Oh, okay.", "Hmm.", "Sure.", "Mmmm", "Mhmm.", "Hmmmm", "Uhhh", "Ahh."],
)  # fmt: skip
def test_backchannels_are_backchannels(text: str) -> None:
    assert classify(words_of(text), frozenset(), CFG) is Verdict.BACKCHANNEL
    j = OverlapJudge(CFG, REPLY)
    assert j.on_partial(text, 300) is Verdict.PENDING  # the user may go on
    assert j.on_end(text, 600) is Verdict.BACKCHANNEL


@pytest.mark.parametrize("text", ["", "(coughs)", "[Laughter]", "*sighs*", "♪"])
def test_no_words_is_a_backchannel_once_over(text: str) -> None:
    j = OverlapJudge(CFG, REPLY)
    assert j.on_partial(text, 400) is Verdict.PENDING
    assert j.on_end(text, 500) is Verdict.BACKCHANNEL


@pytest.mark.parametrize(
    "text", ["Wait, stop.", "No, I meant Spain.", "Stop.", "Hold on.", "Yeah, but what about Rome?"]
)
def test_interruptions_interrupt_on_the_first_partial_that_shows_them(text: str) -> None:
    j = OverlapJudge(CFG, REPLY)
    assert j.on_partial(text, 450) is Verdict.INTERRUPT
    assert j.decided_ms == 450
    # Final: nothing can take it back.
    assert j.on_end("mm-hmm", 900) is Verdict.INTERRUPT
    assert j.on_partial("okay", 950) is Verdict.INTERRUPT


def test_a_backchannel_that_goes_on_becomes_an_interruption() -> None:
    j = OverlapJudge(CFG, REPLY)
    assert j.on_partial("Yeah,", 400) is Verdict.PENDING
    assert j.on_partial("Yeah, but why Paris", 800) is Verdict.INTERRUPT


def test_the_assistants_own_words_are_echo() -> None:
    j = OverlapJudge(CFG, REPLY)
    assert j.on_partial("the capital of France", 400) is Verdict.PENDING
    # Long echo is never cut by the time limit.
    assert j.on_time(CFG.max_wait_ms * 3) is Verdict.PENDING
    # Whisper mishears one word of the echo: still echo.
    assert j.on_end("the capital of friends is Paris", 4000) is Verdict.ECHO


def test_user_words_over_the_echo_interrupt() -> None:
    j = OverlapJudge(CFG, REPLY)
    assert j.on_partial("the capital of France wait stop", 600) is Verdict.INTERRUPT


def test_reference_grows_with_the_reply() -> None:
    j = OverlapJudge(CFG, "The capital")
    j.add_reference("of France is Paris.")
    assert j.on_end("France is Paris", 800) is Verdict.ECHO


def test_undecided_speech_interrupts_after_max_wait() -> None:
    j = OverlapJudge(CFG, REPLY)
    assert j.on_time(CFG.max_wait_ms - 1) is Verdict.PENDING
    assert j.on_time(CFG.max_wait_ms) is Verdict.INTERRUPT
    assert j.decided_ms == CFG.max_wait_ms


def test_config_is_checked() -> None:
    with pytest.raises(ValueError):
        OverlapConfig(max_wait_ms=0)
    with pytest.raises(ValueError):
        OverlapConfig(echo_foreign_share=1.0)


_bc = st.lists(st.sampled_from(sorted(BACKCHANNEL_WORDS)), min_size=1, max_size=4)
_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)


@given(_bc)
def test_any_short_run_of_backchannel_words_never_interrupts(words: list[str]) -> None:
    text = ", ".join(words) + "."
    j = OverlapJudge(CFG, REPLY)
    assert j.on_partial(text, 300) is Verdict.PENDING
    assert j.on_end(text, 700) is Verdict.BACKCHANNEL


@given(st.lists(_word, min_size=1, max_size=12), st.lists(_word, min_size=2, max_size=6))
def test_two_foreign_non_backchannel_words_always_interrupt(
    ref: list[str], foreign: list[str]
) -> None:
    foreign = [w for w in foreign if w not in ref and not is_backchannel([w])]
    if len(foreign) < 2:
        return
    words = ref + foreign
    assert classify(words, frozenset(ref), CFG) is Verdict.INTERRUPT


@given(st.lists(_word, min_size=1, max_size=20))
def test_words_of_the_reply_alone_never_interrupt(ref: list[str]) -> None:
    j = OverlapJudge(CFG, " ".join(ref))
    text = " ".join(ref[: max(1, len(ref) // 2)])
    assert j.on_partial(text, 500) is not Verdict.INTERRUPT
    assert j.on_end(" ".join(ref), 5000) in (Verdict.ECHO, Verdict.BACKCHANNEL)


@given(st.text(max_size=40), st.floats(0, 10_000), st.floats(0, 10_000))
def test_a_verdict_once_given_never_changes(text: str, t1: float, t2: float) -> None:
    j = OverlapJudge(CFG, REPLY)
    first = j.on_end(text, t1)
    assert first is not Verdict.PENDING
    assert j.on_partial("wait stop now", t2) is first
    assert j.on_time(t2 + CFG.max_wait_ms) is first


def test_is_backchannel_phrases() -> None:
    assert is_backchannel(["i", "see"])
    assert not is_backchannel(["i"])
    assert not is_backchannel(["no"])
    assert (
        not is_backchannel(["mum"]) and not is_backchannel(["ham"]) and not is_backchannel(["moon"])
    )
    assert is_backchannel([])


def test_a_turn_far_quieter_than_the_user_is_the_echos_residue_whatever_its_words() -> None:
    # The residue Whisper made words of on the speakerphone test (-32 dBFS, the user -16).
    j = OverlapJudge(CFG, REPLY, user_level_db=-16.0)
    assert j.on_partial("Thank you.", 400, level_db=-32.0) is Verdict.PENDING
    assert j.on_time(CFG.max_wait_ms + 100) is Verdict.PENDING  # no duration rule for echo
    assert j.on_end("Thank you.", 2000, level_db=-33.0) is Verdict.ECHO


def test_the_user_talking_over_at_their_own_level_still_interrupts() -> None:
    j = OverlapJudge(CFG, REPLY, user_level_db=-16.0)
    assert j.on_partial("Wait, stop.", 500, level_db=-16.0 - CFG.quiet_gap_db + 1) is (
        Verdict.INTERRUPT
    )


def test_a_quiet_start_that_grows_loud_is_the_user() -> None:
    j = OverlapJudge(CFG, REPLY, user_level_db=-16.0)
    assert j.on_partial("No", 300, level_db=-35.0) is Verdict.PENDING
    assert j.on_partial("No, I meant Spain", 700, level_db=-18.0) is Verdict.INTERRUPT


def test_before_the_users_level_is_known_words_alone_decide() -> None:
    j = OverlapJudge(CFG, REPLY)
    assert j.on_partial("Wait, stop.", 500, level_db=-60.0) is Verdict.INTERRUPT
    j = OverlapJudge(CFG, REPLY, user_level_db=-16.0)  # the ASR gave no level
    assert j.on_end("Wait, stop.", 900) is Verdict.INTERRUPT


def test_quiet_gap_zero_leaves_it_to_the_words() -> None:
    j = OverlapJudge(OverlapConfig(quiet_gap_db=0), REPLY, user_level_db=-16.0)
    assert j.on_end("Thank you, no.", 900, level_db=-40.0) is Verdict.INTERRUPT
    with pytest.raises(ValueError, match="quiet_gap_db"):
        OverlapConfig(quiet_gap_db=-1)
