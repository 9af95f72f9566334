"""The simulated echo path (core/playout/room.py): gain, delay and the room, block by block."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe.core.playout.room import EchoPath, room_ir


def test_room_ir_has_a_direct_path_and_unit_energy() -> None:
    ir = room_ir(16000)
    assert np.argmax(np.abs(ir)) == 0
    assert np.sum(ir.astype(np.float64) ** 2) == pytest.approx(1.0, rel=1e-5)
    with pytest.raises(ValueError):
        room_ir(0)


@pytest.mark.parametrize("out_rate", [16000, 24000, 48000])
def test_echo_is_the_played_audio_delayed_attenuated_and_resampled(out_rate: int) -> None:
    ir = np.array([1.0], np.float32)  # no room: the exact path
    path = EchoPath(gain_db=-10, delay_ms=50, in_rate=16000, out_rate=out_rate, ir=ir)
    t = np.arange(out_rate) / out_rate
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    block = out_rate // 100
    for i in range(0, len(tone), block):  # played in 10 ms blocks, as the client does
        path.played(tone[i : i + block])
    got = np.concatenate([path.take(320) for _ in range(50)])
    d = 800  # 50 ms at 16 kHz
    assert np.all(got[:d] == 0)
    ref = 0.5 * 10 ** (-10 / 20) * np.sin(2 * np.pi * 440 * np.arange(16000 - 10) / 16000)
    assert np.max(np.abs(got[d : d + len(ref) - d] - ref[: len(ref) - d])) < 0.01


def test_the_room_smears_a_click_into_its_impulse_response() -> None:
    ir = room_ir(16000, length_ms=50)
    path = EchoPath(gain_db=0, delay_ms=0, in_rate=16000, out_rate=16000, ir=ir)
    click = np.zeros(1600, np.float32)
    click[0] = 1.0
    for i in range(0, 1600, 160):
        path.played(click[i : i + 160])
    got = path.take(1600)
    assert np.allclose(got[: len(ir)], ir, atol=1e-6)


def test_take_before_anything_played_is_silence() -> None:
    path = EchoPath(gain_db=-6, delay_ms=0, in_rate=16000, out_rate=48000)
    assert not path.take(320).any()


def test_integer_samples_are_refused() -> None:
    """int16 from a playout, taken as floats, would come back 90 dB too loud and clip the
    mic (the headless client did that: bench turns' echo was full-scale, not -10 dB)."""
    path = EchoPath(gain_db=-10, delay_ms=50, in_rate=16000, out_rate=16000)
    with pytest.raises(TypeError, match="float"):
        path.played(np.full(160, 1000, np.int16))
