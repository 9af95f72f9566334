"""The speech level of a turn and the user's usual level (core/turns/level.py)."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe.core.turns.level import UserLevel, speech_level_db

RATE = 16000


def _tone(seconds: float, amplitude: float) -> np.ndarray:
    t = np.arange(round(seconds * RATE)) / RATE
    return (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_level_is_the_speech_not_the_pauses_around_it() -> None:
    speech = _tone(0.5, 0.1)  # a sine of peak 0.1: power 0.005, -23 dBFS
    padded = np.concatenate([np.zeros(RATE, np.float32), speech, np.zeros(RATE, np.float32)])
    level = speech_level_db(padded, RATE)
    assert level is not None
    assert level == pytest.approx(10 * np.log10(0.005), abs=0.5)
    assert speech_level_db(speech * 0.1, RATE) == pytest.approx(level - 20, abs=0.5)


def test_less_than_a_frame_has_no_level() -> None:
    assert speech_level_db(np.zeros(RATE // 100 - 1, np.float32), RATE) is None


def test_user_level_is_the_median_of_recent_turns() -> None:
    u = UserLevel(keep=3)
    assert u.typical() is None
    u.observe(None)  # a turn the ASR gave no level: nothing learnt
    assert u.typical() is None
    for x in (-40.0, -16.0, -18.0, -17.0):  # the oldest falls out
        u.observe(x)
    assert u.typical() == -17.0
    with pytest.raises(ValueError):
        UserLevel(keep=0)
