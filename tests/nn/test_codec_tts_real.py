"""Smoke test of the committed codec-LM TTS (models/codec-lm-hibari) on real text."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe import config
from voicepipe.nn.codec_tts import CodecLMTTS, SynthOptions


@pytest.fixture(scope="module")
def tts() -> CodecLMTTS:
    return CodecLMTTS.from_config(config.Config())


def test_greedy_speculation_matches_plain_ar_on_the_real_model(tts: CodecLMTTS) -> None:
    text = "Sure! The capital of France is Paris."
    ar, st_ar, _ = tts.decode_codes(text, SynthOptions(rule="ar"))
    spec, st, _ = tts.decode_codes(text, SynthOptions(rule="greedy", spec_k=4))
    np.testing.assert_array_equal(spec, ar)
    assert ar.shape[1] == tts.m.target.args.n_q and 30 < len(ar) < 80  # ~2 s of frames
    assert st["target_passes"] < st_ar["target_passes"] == len(ar)
    assert st["acceptance_rate"] > 0.2  # the draft was trained for this target


def test_streamed_audio_is_speech_length_and_finite(tts: CodecLMTTS) -> None:
    res = tts.synth("Hello there.", SynthOptions(rule="relaxed", beta=0.2, temperature=0.7))
    assert 0.4 < res.audio_s < 2.5
    assert np.isfinite(res.audio).all() and 0.01 < float(np.abs(res.audio).max()) <= 1.0
    assert res.stats["frames"] * 1024 == len(res.audio)
    assert res.ttfa_s <= res.wall_s
