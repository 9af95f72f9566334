"""The client's reference playout (FIFO) behind the same seam as the adaptive buffer."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe import config
from voicepipe.client import FifoPlayout, make_playout

RATE = 16000
FRAME = 320
MS = 1_000_000


def _frame(i: int, value: int = 1) -> np.ndarray:
    return np.full(FRAME, value + i, np.int16)


def test_fifo_waits_for_start_delay_then_plays_in_order() -> None:
    p = FifoPlayout(RATE, start_ms=40)
    p.push(0, 0, _frame(0), 0, reply=1)
    assert not p.pull(160, 0).any()  # 20 ms buffered < 40 ms start delay
    p.push(1, FRAME, _frame(1), 20 * MS, reply=1)
    out = np.concatenate([p.pull(160, (30 + 10 * k) * MS) for k in range(4)])
    np.testing.assert_array_equal(out, np.concatenate([_frame(0), _frame(1)]))
    assert p.playouts[1].first_play_ns == 30 * MS
    assert p.playouts[1].played_samples == 2 * FRAME


def test_fifo_underrun_then_end() -> None:
    p = FifoPlayout(RATE, start_ms=20)
    p.push(0, 0, _frame(0), 0, reply=1)
    p.pull(FRAME, 0)
    silent = p.pull(FRAME, 20 * MS)  # dry mid-reply
    assert not silent.any()
    p.pull(FRAME, 40 * MS)
    s = p.stats()
    assert s["underruns"] == 1 and s["concealed_ms"] == pytest.approx(40.0)
    p.push(1, FRAME, np.zeros(0, np.int16), 60 * MS, reply=1, last=True)
    p.pull(FRAME, 60 * MS)
    assert p.playouts[1].done


def test_fifo_clear_drops_older_replies() -> None:
    p = FifoPlayout(RATE, start_ms=20)
    for i in range(5):
        p.push(i, i * FRAME, _frame(i), 0, reply=1)
    p.pull(FRAME, 0)
    p.clear(upto_reply=1)
    assert not p.pull(FRAME, 20 * MS).any() and p.playouts[1].done
    p.push(9, 0, _frame(0, 7), 0, reply=1)  # late audio of the cut reply is ignored
    p.push(0, 10 * FRAME, _frame(0, 9), 0, reply=2, last=True)
    assert (p.pull(FRAME, 40 * MS) == 9).all()
    assert p.stats()["late_frames"] == 1


@pytest.mark.parametrize("name", ["fifo", "adaptive"])
def test_make_playout_honours_the_seam(name: str) -> None:
    """Both implementations: push → pull at real time plays every sample of the reply."""
    p = make_playout(name, config.Config(), RATE)
    ref = np.concatenate([_frame(i) for i in range(10)])
    for i in range(10):
        p.push(i, i * FRAME, ref[i * FRAME : (i + 1) * FRAME], i * 20 * MS, reply=1, last=i == 9)
    played = [p.pull(160, (5 + 10 * k) * MS) for k in range(40)]
    assert p.playouts[1].done and p.playouts[1].played_samples == len(ref)
    assert p.playouts[1].first_play_ns is not None
    assert np.sum(np.concatenate(played) != 0) >= len(ref) * 0.9
    assert {"underruns", "concealed_ms", "current_delay_ms", "target_delay_ms"} <= set(p.stats())
    with pytest.raises(ValueError):
        make_playout("nope", config.Config(), RATE)


def test_lead_silence_is_the_time_before_the_first_audible_sample() -> None:
    from voicepipe.client import lead_silence_ms

    pcm = np.zeros(22050, np.int16)
    pcm[6615:] = 3000  # audible from 300 ms
    pcm[:100] = 50  # codec noise below -40 dBFS does not count
    assert lead_silence_ms(pcm, 22050) == 300.0
    assert lead_silence_ms(np.zeros(100, np.int16), 22050) is None
    assert lead_silence_ms(pcm, 0) is None
