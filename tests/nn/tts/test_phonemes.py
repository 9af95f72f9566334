"""Frame alignment helpers (voicepipe/nn/tts/phonemes.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voicepipe.nn.tts.phonemes import align, trim_pads


def test_trim_pads_caps_only_the_two_edge_pads() -> None:
    assert trim_pads([13, 1, 4, 13, 6, 1], 2) == [2, 1, 4, 13, 6, 1]  # sentence: tail 1 stays
    assert trim_pads([14, 2, 3, 17, 6], 2) == [2, 2, 3, 17, 2]  # unpunctuated end capped
    assert trim_pads([14, 2, 3, 17, 6], 0) == [14, 2, 3, 17, 6]  # 0: as given


@given(st.lists(st.integers(0, 40), min_size=2, max_size=60), st.integers(1, 8))
def test_trim_pads_keeps_length_and_inner_durations(durs: list[int], cap: int) -> None:
    out = trim_pads(durs, cap)
    assert len(out) == len(durs) and out[1:-1] == durs[1:-1]
    assert out[0] == min(durs[0], cap) and out[-1] == min(durs[-1], cap)
    assert align(out).n_frames <= align(durs).n_frames
