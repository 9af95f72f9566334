"""`voicepipe bench tts-batch`'s playout model: how long real-time playback waits."""

from __future__ import annotations

import pytest

from voicepipe.bench.tts_batch import stalls


def test_audio_arriving_ahead_of_playback_never_stalls() -> None:
    assert stalls([(0.0, 1.0), (0.5, 1.0), (1.9, 1.0)]) == 0.0


def test_late_pieces_add_their_wait_and_push_the_rest_back() -> None:
    # plays 0-1, waits 1-1.5, plays 1.5-2.5, the third piece (2.0) is then on time
    assert stalls([(0.0, 1.0), (1.5, 1.0), (2.0, 0.5)]) == pytest.approx(0.5)
    assert stalls([(0.0, 0.2), (1.0, 0.2), (2.0, 0.2)]) == pytest.approx(0.8 + 0.8)


def test_nothing_or_one_piece_never_stalls() -> None:
    assert stalls([]) == 0.0
    assert stalls([(3.0, 1.0)]) == 0.0
