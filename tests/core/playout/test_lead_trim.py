"""LeadTrim: a chunk's leading silence is not sent (voicepipe/core/playout/lead_trim.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicepipe.core.playout.lead_trim import LeadTrim


def _voice(quiet: int, loud: int) -> np.ndarray:
    x = np.full(quiet + loud, 1e-4, np.float32)  # codec noise under the threshold
    x[quiet:] = 0.3
    return x


def test_sends_from_margin_before_the_first_audible_sample() -> None:
    t = LeadTrim(threshold=0.01, margin=40, max_drop=10_000)
    x = _voice(300, 100)
    out = t.push(x)
    assert len(out) == 140 and out[40] == pytest.approx(0.3) and t.dropped == 260
    assert t.push(np.zeros(5, np.float32)).shape == (5,)  # afterwards: everything


def test_silence_split_over_chunks_keeps_only_the_margin() -> None:
    t = LeadTrim(threshold=0.01, margin=40, max_drop=10_000)
    x = _voice(300, 100)
    parts = [t.push(c) for c in (x[:100], x[100:290], x[290:])]
    assert [len(p) for p in parts] == [0, 0, 140]
    np.testing.assert_array_equal(parts[2], x[260:])


def test_never_drops_more_than_max_drop() -> None:
    t = LeadTrim(threshold=0.01, margin=10, max_drop=50)
    quiet = np.full(80, 1e-4, np.float32)
    out = t.push(quiet)  # a whisper-quiet chunk: past the bound it is sent
    assert t.dropped == 50 and len(out) == 30
    assert len(t.push(quiet)) == 80


def test_a_stream_that_ends_quiet_flushes_its_margin() -> None:
    t = LeadTrim(threshold=0.01, margin=40, max_drop=10_000)
    assert len(t.push(np.zeros(100, np.float32))) == 0
    assert len(t.flush()) == 40


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        LeadTrim(threshold=0.0, margin=1, max_drop=1)


@given(
    st.integers(0, 400), st.integers(1, 200), st.integers(0, 60),
    st.lists(st.integers(1, 97), min_size=1, max_size=12),
)  # fmt: skip
def test_output_is_a_suffix_of_the_input_whatever_the_chunking(
    quiet: int, loud: int, margin: int, cuts: list[int]
) -> None:
    x = _voice(quiet, loud)
    t = LeadTrim(threshold=0.01, margin=margin, max_drop=10_000)
    edges = np.cumsum([0, *cuts])
    chunks = [x[a:b] for a, b in zip(edges, [*edges[1:], len(x)], strict=True) if a < len(x)]
    out = np.concatenate([t.push(c) for c in chunks] + [t.flush()])
    assert len(out) == len(x) - max(0, quiet - margin)
    np.testing.assert_array_equal(out, x[len(x) - len(out) :])
