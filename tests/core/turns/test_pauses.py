"""The pause log (core/turns/pauses.py): what the ``turns.pause`` span says of a pause."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicepipe.core.turns.pauses import PauseLog

MS = 1_000_000


def test_a_pause_with_its_decode_transcript_and_estimate() -> None:
    log = PauseLog(min_ms=64)
    end = 1_000 * MS
    log.silence(end, 32, 400)  # a gap between words: no pause yet
    log.silence(end, 64, 400)
    log.decoding(end, 64)
    log.decoded(end, 310.5)
    log.stable(end, 384, "what is the capital of")
    log.estimate(end, 416, 0.0001, 1500)
    attrs = log.close("resumed", 700)
    assert attrs == {
        "outcome": "resumed",
        "pause_ms": 700,
        "needed_ms": 400,
        "speech_end_media_ms": 1000,
        "decode_at_ms": 64,
        "decode_ms": 310.5,
        "stable_at_ms": 384,
        "p_end_at_ms": 416,
        "needed_after_ms": 1500,
        "p_end": 0.0001,
        "text": "what is the capital of",
    }
    assert log.close("silence", 0) is None  # closed once


def test_a_short_gap_is_no_pause_and_other_speech_ends_are_ignored() -> None:
    log = PauseLog(min_ms=64)
    log.silence(5 * MS, 32, 400)
    assert log.close("resumed", 32) is None
    log.silence(5 * MS, 96, 400)
    log.estimate(4 * MS, 100, 0.9, 200)  # an estimate for an older speech end: not this pause
    log.stable(4 * MS, 100, "old words")
    attrs = log.close("silence", 400)
    assert attrs is not None and "p_end" not in attrs and "text" not in attrs
    assert attrs["outcome"] == "silence" and attrs["pause_ms"] == 400


def test_the_first_estimate_and_transcript_of_a_pause_are_kept() -> None:
    log = PauseLog(min_ms=0)
    log.silence(0, 0, 400)
    log.estimate(0, 300, 0.5, 200)
    log.estimate(0, 500, 0.001, 1500)
    attrs = log.close("silence", 600)
    assert attrs is not None and attrs["p_end"] == 0.5 and attrs["p_end_at_ms"] == 300


def test_negative_min_ms_is_refused() -> None:
    with pytest.raises(ValueError, match="min_ms"):
        PauseLog(min_ms=-1)


@given(
    st.lists(st.tuples(st.integers(0, 3), st.floats(0, 3000)), max_size=40),
    st.floats(0, 500),
)
def test_a_span_is_only_for_a_pause_at_least_min_ms_long(
    chunks: list[tuple[int, float]], min_ms: float
) -> None:
    log = PauseLog(min_ms=min_ms)
    longest: dict[int, float] = {}
    last = None
    for end, silence in chunks:
        if last is not None and end != last:
            longest.clear()  # another speech end: the pause before it was left open, replaced
        log.silence(end * MS, silence, 400)
        if silence >= min_ms:
            longest[end] = max(longest.get(end, 0.0), silence)
        last = end
    attrs = log.close("silence", 1.0)
    assert (attrs is not None) == bool(longest)
