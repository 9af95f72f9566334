"""Cutting a text too long for one codec-LM pass: sentence, then clause, then word."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.core.text.split import CLAUSE, SENTENCE, WORD, Unsplittable, split_to_fit, units


def n_words(piece: str) -> int:
    """A stand-in for the planner: one frame per word (exactly additive)."""
    return len(piece.split())


def test_a_text_that_fits_is_one_piece_untouched() -> None:
    calls: list[str] = []

    def frames(piece: str) -> int:
        calls.append(piece)
        return n_words(piece)

    text = "Hello  there. How are you?"
    assert split_to_fit(text, frames, 100) == [text]
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
    text = "One two three. Four five. Six seven eight. Nine."
    assert split_to_fit(text, n_words, 6) == ["One two three. Four five.", "Six seven eight. Nine."]


def test_a_long_sentence_is_cut_at_clauses_then_words() -> None:
    text = "Short one. First, a b c d e f, then the end. Tail."
    assert split_to_fit(text, n_words, 4) == [
        "Short one.",
        "First,",
        "a b c d",  # the clause "a b c d e f," alone is too long: cut between words
        "e f,",
        "then the end.",
        "Tail.",  # a cut at a sentence end stays one (a natural pause), not merged across
    ]


def test_a_piece_over_the_estimate_gives_back_units() -> None:
    """Planned whole, a piece can be longer than its units planned alone."""

    def frames(piece: str) -> int:
        n = len(piece.split())
        return n + (3 if n > 2 else 0)  # superadditive: the estimate is short

    text = "A b. C. D. E f. G."
    pieces = split_to_fit(text, frames, 5)
    assert pieces == ["A b.", "C. D.", "E f.", "G."]
    assert all(frames(p) <= 5 for p in pieces)


def test_a_word_too_long_alone_is_a_clear_error() -> None:
    def frames(piece: str) -> int:
        return sum(20 if len(w) > 20 else 1 for w in piece.split())

    with pytest.raises(Unsplittable, match="too long to synthesise in one pass"):
        split_to_fit("Fine words. " + "x" * 25 + " more.", frames, 10)


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
    st.integers(0, 3),
)
def test_pieces_fit_and_keep_every_word_in_order(tokens, limit: int, extra: int) -> None:
    text = " ".join(w + p for w, p in tokens)

    def frames(piece: str) -> int:  # additive (extra 0) or over the units' sum
        n = len(piece.split())
        return n + (extra if n > 1 else 0)

    pieces = split_to_fit(text, frames, limit)
    assert all(frames(p) <= limit for p in pieces)
    assert " ".join(pieces).split() == text.split()
