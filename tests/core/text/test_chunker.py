"""Sentence / clause chunker: early first clause, never splits words or numbers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.core.text.chunker import Chunker


def chunks_of(text: str, cuts: list[int] | None = None, **kw: int) -> list[str]:
    c = Chunker(**kw)
    out: list[str] = []
    pieces = (
        [text]
        if cuts is None
        else [text[a:b] for a, b in zip([0, *cuts], [*cuts, None], strict=True)]
    )
    for p in pieces:
        out += c.push(p)
    last = c.flush()
    return out + ([last] if last else [])


def test_first_clause_goes_early_then_sentences() -> None:
    text = (
        "Sure, here is what I found: the museum opens at 9.30 am, closes at 5 pm, "
        "and costs $1,000.50 for a year pass. Dr. Smith says it is worth it! Enjoy."
    )
    assert chunks_of(text) == [
        "Sure, here is what I found:",
        "the museum opens at 9.30 am, closes at 5 pm, and costs $1,000.50 for a year pass.",
        "Dr. Smith says it is worth it!",
        "Enjoy.",
    ]


def test_waits_for_the_character_after_punctuation() -> None:
    c = Chunker()
    assert c.push("It costs 3.") == []  # could be 3.5
    assert c.push("5 dollars, more or less, in total. And") == [
        "It costs 3.5 dollars,",
        "more or less, in total.",
    ]
    assert c.push(" then") == []
    assert c.flush() == "And then"
    assert c.flush() is None


def test_numbers_abbreviations_and_lists() -> None:
    # (first_break_words=0: the phrase break before "by" is tested apart, below)
    assert chunks_of(
        "We need 1,000 or 2,500 units by e.g. March. Thanks.", first_break_words=0
    ) == [
        "We need 1,000 or 2,500 units by e.g. March.",
        "Thanks.",
    ]
    assert chunks_of("Steps:\n1. Open the box.\n2. Plug it in.") == [
        "Steps:",
        "1. Open the box.",
        "2. Plug it in.",
    ]
    assert chunks_of("Here are three tips: 1. Sleep well. 2. Eat less.") == [
        "Here are three tips:",
        "1. Sleep well.",
        "2. Eat less.",
    ]
    assert chunks_of('He said "stop." Then he left.') == ['He said "stop."', "Then he left."]
    assert chunks_of("**Bold** and `code` are not spoken.") == ["Bold and code are not spoken."]


def test_long_sentences_are_cut_at_clauses_or_spaces_never_in_words() -> None:
    long_clause = "word " * 30 + "end, " + "more " * 10 + "done."
    out = chunks_of("Ok. " + long_clause, soft_max_chars=60, hard_max_chars=100)
    assert out[0] == "Ok."
    assert all(len(c) <= 100 for c in out)
    assert " ".join(out).split() == ("Ok. " + long_clause).split()
    assert chunks_of("Hmm...") == ["Hmm..."]
    assert chunks_of("...") == []


TEXT = st.text(
    alphabet=st.sampled_from(list("abc xyz 0123456789.,;:!?\"'\n-")), min_size=0, max_size=200
)


@settings(max_examples=300, deadline=None)
@given(TEXT, st.lists(st.integers(0, 200), max_size=30))
def test_streaming_invariance_and_no_text_lost(text: str, cuts: list[int]) -> None:
    cuts = sorted({c for c in cuts if 0 < c < len(text)})
    whole = chunks_of(text)
    assert chunks_of(text, cuts) == whole
    words = [w for w in text.split() if any(ch.isalnum() for ch in w)]
    spoken = [w for w in " ".join(whole).split() if any(ch.isalnum() for ch in w)]
    assert spoken == words  # nothing dropped, no word or number split


def test_a_long_unpunctuated_first_sentence_breaks_before_a_conjunction() -> None:
    text = (
        "The sky is blue because of the scattering of light by tiny particles in the "
        "atmosphere, which is called Rayleigh scattering. It is strongest for blue light."
    )
    assert chunks_of(text) == [
        "The sky is blue",
        "because of the scattering of light by tiny particles in the atmosphere, which is "
        "called Rayleigh scattering.",
        "It is strongest for blue light.",
    ]
    # Only the first chunk, only after enough words, never a preposition or "that".
    assert chunks_of("Paris is the capital of France and its largest city.") == [
        "Paris is the capital of France",
        "and its largest city.",
    ]
    assert chunks_of("Yes and no.") == ["Yes and no."]
    assert chunks_of("I think that learning that language is fun.") == [
        "I think that learning that language is fun."
    ]
    # Punctuation that comes first, with enough words, still wins.
    assert chunks_of("Yes of course, the sky is blue because of light.") == [
        "Yes of course,",
        "the sky is blue because of light.",
    ]
    assert chunks_of("Well, it depends on the weather and the season.", first_break_words=0) == [
        "Well, it depends on the weather and the season."
    ]


def test_a_first_sentence_with_no_conjunction_breaks_at_a_phrase() -> None:
    # Before a number once a verb phrase is there; before a preposition one word later.
    assert chunks_of("The moon is approximately 384,400 kilometers away from Earth.") == [
        "The moon is approximately",
        "384,400 kilometers away from Earth.",
    ]
    assert chunks_of("It takes about 8 minutes for light from the Sun to reach Earth.") == [
        "It takes about 8 minutes",
        "for light from the Sun to reach Earth.",
    ]
    assert chunks_of("You could try making a simple pasta with garlic and olive oil.") == [
        "You could try making a simple pasta",
        "with garlic and olive oil.",
    ]
    # No verb in front: a noun phrase is never cut ("The capital | of France").
    assert chunks_of("The capital of the United Kingdom of Great Britain is London.") == [
        "The capital of the United Kingdom of Great Britain is London."
    ]
    # Not before "of" or "to" (they bind to what precedes), nor inside quotes.
    assert chunks_of("Weather is the current state of the atmosphere today.") == [
        "Weather is the current state of the atmosphere today."
    ]
    assert chunks_of('Ikigai is a word that means "joy in life" in Japanese.') == [
        'Ikigai is a word that means "joy in life"',
        "in Japanese.",
    ]
    assert chunks_of("A leap year has 366 days.") == ["A leap year has 366 days."]
    # Never after an article or a preposition, nor right after the verb.
    assert chunks_of("The answer is about the 42 we saw.") == ["The answer is about the 42 we saw."]
    assert chunks_of("The speed of light is 299,792 kilometers per second.") == [
        "The speed of light is 299,792 kilometers per second."
    ]
    # A number is a break as soon as its first digit has come, whatever follows.
    c = Chunker()
    assert c.push("The moon is approximately 3") == ["The moon is approximately"]
    assert c.push("84,400 km away.") == []
    assert c.flush() == "384,400 km away."
    # Off with the other breaks.
    assert chunks_of("The moon is approximately 384,400 km away.", first_break_words=0) == [
        "The moon is approximately 384,400 km away."
    ]


def test_a_break_word_is_only_a_word_once_it_ends() -> None:
    c = Chunker()
    assert c.push("The new phone runs and") == []  # "and" might be "android"
    assert c.push("roid apps and") == []
    assert c.push(" games.") == ["The new phone runs android apps"]
    assert c.flush() == "and games."


WORDS = st.lists(
    st.sampled_from(
        [
            "the",
            "sky",
            "and",
            "because",
            "which",
            "of",
            "blue",
            "a,",
            "so",
            "end.",
            "android",
            "if",
            "x\n",
            "is",
            "in",
            "42",
            "3.5,",
        ]
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(WORDS, st.lists(st.integers(0, 300), max_size=30))
def test_break_words_keep_streaming_invariance(words: list[str], cuts: list[int]) -> None:
    text = " ".join(words)
    cuts = sorted({c for c in cuts if 0 < c < len(text)})
    whole = chunks_of(text)
    assert chunks_of(text, cuts) == whole
    assert " ".join(whole).split() == [w for w in text.split() if any(ch.isalnum() for ch in w)]
