"""core/playout/echo_gate.py: frames the loudspeaker explains are muted, the user's are not."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe.core.playout.echo_gate import EchoGate, GateConfig, power_db

N = 160
rng = np.random.default_rng(0)


def _noise(db: float, n: int = N) -> np.ndarray:
    x = rng.standard_normal(n).astype(np.float32)
    return (x / np.sqrt(np.mean(x**2)) * 10 ** (db / 20)).astype(np.float32)


def _learnt(gate: EchoGate, echo_db: float = -14.0, ref_db: float = -26.0) -> None:
    """Two seconds of the speaker alone: its echo ``echo_db`` below the reference."""
    for _ in range(200):
        gate.apply(_noise(ref_db + echo_db), _noise(ref_db, 35 * N))


def test_the_echo_is_muted_and_the_user_over_it_is_not() -> None:
    gate = EchoGate(N)
    _learnt(gate)
    assert -16.0 < gate.echo_db() < -12.0
    echo = _noise(-40.0)
    out = gate.apply(echo, _noise(-26.0, 35 * N))
    assert power_db(out) < -75.0  # 40 dB down
    user = _noise(-26.0) + _noise(-40.0)  # the user, 14 dB over the echo
    np.testing.assert_array_equal(gate.apply(user, _noise(-26.0, 35 * N)), user)


def test_a_silent_speaker_gates_nothing_and_teaches_nothing() -> None:
    gate = EchoGate(N)
    quiet = _noise(-50.0)
    np.testing.assert_array_equal(gate.apply(quiet, np.zeros(35 * N, np.float32)), quiet)
    assert gate.gated == 0 and gate.echo_db() == GateConfig().default_db


def test_before_it_has_learnt_it_assumes_a_usual_echo() -> None:
    gate = EchoGate(N)
    # At the start of a session: an echo 12 dB down is muted at once, a user as loud as
    # the speaker is not.
    out = gate.apply(_noise(-38.0), _noise(-26.0, 35 * N))
    assert power_db(out) < -70.0
    user = _noise(-26.0)
    np.testing.assert_array_equal(gate.apply(user, _noise(-26.0, 35 * N)), user)


def test_double_talk_does_not_raise_the_echo_level_it_learns() -> None:
    gate = EchoGate(N)
    _learnt(gate)
    for i in range(120):  # the user talks over 40 % of the next frames
        mic = _noise(-26.0) if i % 5 < 2 else _noise(-40.0)
        gate.apply(mic, _noise(-26.0, 35 * N))
    assert gate.echo_db() < -8.0  # still the echo's level, not the user's


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        EchoGate(0)
    with pytest.raises(ValueError):
        GateConfig(quantile=1.0)
    with pytest.raises(ValueError):
        GateConfig(learn_frames=500, history=300)


def test_a_user_over_a_speaker_with_no_echo_is_never_gated() -> None:
    """No echo at all (a headset): the mic is silent while the speaker plays, then the
    user talks for two seconds while the speaker's last words are still in the window."""
    gate = EchoGate(N)
    for _ in range(100):
        gate.apply(np.zeros(N, np.float32), _noise(-26.0, 35 * N))
    silent = gate.gated  # (silence "gated" is still silence)
    for _ in range(200):
        user = _noise(-24.0)
        np.testing.assert_array_equal(gate.apply(user, _noise(-26.0, 35 * N)), user)
    assert gate.gated == silent


def test_frames_around_a_pause_teach_nothing() -> None:
    gate = EchoGate(N)
    _learnt(gate)
    level = gate.echo_db()
    stopped = np.concatenate([_noise(-26.0, 10 * N), np.zeros(25 * N, np.float32)])
    for _ in range(200):  # the speaker stopped; the user speaks; the window still has it
        gate.apply(_noise(-20.0), stopped)
    assert gate.echo_db() == level
