"""TailTrim: a chunk's trailing silence is cut to a pause (voicepipe/core/playout/tail_trim.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicepipe.core.playout.tail_trim import TailTrim, ends_sentence

NOISE = 1e-4  # codec noise under the threshold


def _voice(*runs: tuple[int, bool]) -> np.ndarray:
    """Runs of (length, audible)."""
    return np.concatenate([np.full(n, 0.3 if loud else NOISE, np.float32) for n, loud in runs])


def test_holds_quiet_samples_until_speech_resumes() -> None:
    t = TailTrim(threshold=0.01)
    assert len(t.push(_voice((50, True), (30, False)))) == 50  # the pause is held...
    out = t.push(_voice((20, True)))
    assert len(out) == 50 and np.all(out[:30] == np.float32(NOISE))  # ...and sent with speech
    assert t.dropped == 0


def test_the_end_keeps_only_keep_samples_of_the_tail() -> None:
    t = TailTrim(threshold=0.01)
    assert len(t.push(_voice((50, True), (400, False)))) == 50
    assert len(t.end(120)) == 120 and t.dropped == 280
    assert len(t.end(120)) == 0  # nothing held any more


def test_a_short_tail_is_sent_whole() -> None:
    t = TailTrim(threshold=0.01)
    t.push(_voice((50, True), (30, False)))
    assert len(t.end(120)) == 30 and t.dropped == 0


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        TailTrim(threshold=0.0)
    with pytest.raises(ValueError):
        TailTrim(threshold=0.01).end(-1)


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("The capital of France is Paris.", True),
        ("Really?! ", True),
        ('He said "yes."', True),
        ("The moon is approximately", False),
        ("Tea is made by steeping leaves,", False),
    ],
)
def test_which_chunks_end_a_sentence(text: str, sentence: bool) -> None:
    assert ends_sentence(text) is sentence


@given(
    st.lists(st.tuples(st.integers(1, 120), st.booleans()), min_size=1, max_size=8),
    st.integers(0, 200),
    st.lists(st.integers(1, 97), min_size=1, max_size=12),
)
def test_only_the_final_quiet_run_is_shortened_whatever_the_chunking(
    runs: list[tuple[int, bool]], keep: int, cuts: list[int]
) -> None:
    x = _voice(*runs)
    t = TailTrim(threshold=0.01)
    edges = np.cumsum([0, *cuts])
    chunks = [x[a:b] for a, b in zip(edges, [*edges[1:], len(x)], strict=True) if a < len(x)]
    out = np.concatenate([t.push(c) for c in chunks] + [t.end(keep)])
    loud = np.flatnonzero(np.abs(x) > 0.01)
    last = int(loud[-1]) + 1 if loud.size else 0
    tail = len(x) - last
    assert len(out) == last + min(keep, tail) and t.dropped == tail - min(keep, tail)
    np.testing.assert_array_equal(out, x[: len(out)])
