"""The teacher's durations (hibari's /Clip_output_0) line up exactly with its audio."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe.nn.tts.hibari_teacher import SAMPLES_PER_UNIT, HibariTeacher, n_phoneme_ids


@pytest.fixture(scope="module")
def teacher() -> HibariTeacher:
    return HibariTeacher()


@pytest.mark.parametrize(
    "text",
    [
        "Sure! The capital of France is Paris.",
        "It's 7:30 pm on March 3rd, 2024. Call me at 555 1234.",
    ],
)
def test_duration_sum_equals_samples(teacher: HibariTeacher, text: str) -> None:
    utt = teacher.synthesize(text)
    assert len(utt.durations) == len(utt.ids)
    assert utt.ids[0] == 0 and utt.ids[-1] == 0  # the two pads carry durations too
    assert all(d >= 0 for d in utt.durations)
    assert sum(utt.durations) * SAMPLES_PER_UNIT == utt.n_samples
    assert max(utt.ids) < n_phoneme_ids()


def test_same_audio_as_plain_hibari(teacher: HibariTeacher) -> None:
    # The extra graph output must not change what the model synthesizes.
    text = "Hello there, how are you?"
    utt = teacher.synthesize(text, seed=3)
    ref = teacher.hibari(text, seed=3)
    assert utt.wave.shape == ref.shape
    np.testing.assert_allclose(utt.wave, ref, atol=1e-5)
