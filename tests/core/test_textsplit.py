"""Cutting a text too long for one codec-LM pass: sentence, then clause, then word."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.core.textsplit import CLAUSE, SENTENCE, WORD, Unsplittable, split_to_fit, units


def words_fit(n: int):
    """A stand-in for the planner: a piece fits if it has at most n words."""
    calls: list[str] = []

    def fits(piece: str) -> bool:
        calls.append(piece)
        return len(piece.split()) <= n

    return fits, calls


def test_a_text_that_fits_is_one_piece_untouched() -> None:
    fits, calls = words_fit(100)
    text = "Hello  there. How are you?"
    assert split_to_fit(text, fits) == [text]
    assert calls == [text]  # planned once, as before the split existed


def test_units_at_each_level() -> None:
    words = 'He said "stop." Then, slowly; it went: on — and on! Done…'.split()
    assert [" ".join(u) for u in units(words, SENTENCE)] == [
        'He said "stop."',
        "Then, slowly; it went: on — and on!",
        "Done…",
    ]
    assert [" ".join(u) for u in units(words, CLAUSE)] == [
        'He said "stop."',
        "Then,",
        "slowly;",
        "it went:",
        "on —",
        "and on!",
        "Done…",
    ]
    assert units(words, WORD) == [[w] for w in words]


def test_sentences_are_packed_greedily() -> None:
    fits, _ = words_fit(6)
    text = "One two three. Four five. Six seven eight. Nine."
    assert split_to_fit(text, fits) == ["One two three. Four five.", "Six seven eight. Nine."]


def test_a_long_sentence_is_cut_at_clauses_then_words() -> None:
    fits, _ = words_fit(4)
    text = "Short one. First, a b c d e f, then the end. Tail."
    assert split_to_fit(text, fits) == [
        "Short one.",
        "First,",
        "a b c d",  # the clause "a b c d e f," alone is too long: cut between words
        "e f,",
        "then the end.",
        "Tail.",  # a cut at a sentence end stays one (a natural pause), not merged across
    ]


def test_a_word_too_long_alone_is_a_clear_error() -> None:
    def fits(piece: str) -> bool:
        return "x" * 20 not in piece

    with pytest.raises(Unsplittable, match="too long to synthesise in one pass"):
        split_to_fit("Fine words. " + "x" * 25 + " more.", fits)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text("abcdefgh", min_size=1, max_size=6),
            st.sampled_from(["", ",", ".", "!", "?", ";", ":", " —"]),
        ),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 12),
)
def test_pieces_fit_and_keep_every_word_in_order(tokens, n: int) -> None:
    text = " ".join(w + p for w, p in tokens)
    fits, _ = words_fit(n)
    pieces = split_to_fit(text, fits)
    assert all(fits(p) for p in pieces)
    assert " ".join(pieces).split() == text.split()
