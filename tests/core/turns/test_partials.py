"""Stable prefixes by local agreement: committed words never change, only the tail does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.core.turns.partials import StablePrefix, agreement, unstable_words, word_key


def test_word_key_ignores_case_and_punctuation():
    assert word_key("Lights.") == word_key("lights,") == "lights"
    assert word_key("don't") == "don't"


def test_agreement_and_flicker_measure():
    assert agreement("a b c".split(), "a B d".split()) == 2
    assert unstable_words("Add 3 apples, two", "Add three apples, two lemons.") == 0
    assert unstable_words("Add three pebbles", "Add three apples.") == 1
    assert unstable_words("My flight number is 200 and", "My flight number is 246.") == 1


def test_two_agreeing_hypotheses_commit_all_but_the_last_word():
    sp = StablePrefix()
    assert sp.update("Turn on").stable == ""  # nothing to agree with yet
    p = sp.update("Turn on the kitchen")
    assert p.stable == "Turn on"  # "on" agreed; never the newest hypothesis's last word
    p = sp.update("Turn on the kitchen lights.")
    assert p.stable == "Turn on the kitchen"
    assert p.text == "Turn on the kitchen lights."


def test_committed_spelling_is_kept_exactly():
    sp = StablePrefix()
    sp.update("Good morning, how")
    sp.update("Good morning, how are")
    p = sp.update("Good morning. How are you")
    assert p.stable.startswith("Good morning, how")
    assert p.text == "Good morning, how are you"


def test_committed_words_survive_a_disagreeing_hypothesis():
    sp = StablePrefix()
    sp.update("What is the weather")
    sp.update("What is the weather like")
    assert sp.stable == "What is the weather"
    p = sp.update("Want is a weather like in Paris")
    assert p.stable == "What is the weather"
    assert p.text.startswith("What is the weather")
    assert p.text == "What is the weather like in Paris"  # the tail follows the newest


def test_agreed_words_take_the_newest_spelling_for_the_llm():
    sp = StablePrefix()
    sp.update("turn on the")
    sp.update("turn on the kitchen")
    p = sp.update("Turn on the kitchen lights.")
    assert p.stable == "turn on the kitchen"  # shown as first committed: no flicker
    assert p.text == "turn on the kitchen lights."
    assert p.agreed == "Turn on the kitchen"  # what the final most likely repeats
    assert p.heard == "Turn on the kitchen lights."
    # A newest hypothesis that disagrees with a committed word: the committed spelling.
    p = sp.update("Tern on a kitchen light")
    assert p.agreed == p.stable == "turn on the kitchen"
    assert p.heard == "Tern on a kitchen light"


def test_last_word_cut_mid_word_is_not_committed():
    sp = StablePrefix()
    sp.update("Tell me a sh-")
    p = sp.update("Tell me a sh-")
    assert p.stable == "Tell me a"


words = st.sampled_from("the cat sat on a mat and then it ran away".split())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(words, max_size=12), max_size=12))
def test_stable_only_grows_and_prefixes_the_text(hyps):
    sp = StablePrefix()
    prev_stable: list[str] = []
    for h in hyps:
        p = sp.update(" ".join(h))
        stable = p.stable.split()
        assert stable[: len(prev_stable)] == prev_stable
        assert p.stable.startswith(" ".join(prev_stable))
        assert p.text.split()[: len(stable)] == stable
        assert [word_key(w) for w in p.agreed.split()] == [word_key(w) for w in stable]
        assert p.heard == " ".join(h)
        prev_stable = stable
