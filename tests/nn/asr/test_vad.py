"""Streaming Silero VAD on the committed clips: state carried across arbitrary pieces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from voicepipe.audio import read_wav
from voicepipe.nn.asr.vad import CHUNK, SileroVad, default_model_path

DATA = Path(__file__).resolve().parents[2] / "data" / "asr"


def clip(name: str) -> np.ndarray:
    pcm, sr = read_wav(DATA / name)
    assert sr == 16000
    return pcm


def test_model_io_matches_what_the_wrapper_assumes():
    vad = SileroVad()
    inputs = {i.name: i.shape for i in vad.session.get_inputs()}
    assert inputs["input"][1] == CHUNK + 64
    assert inputs["h"] == [1, 1, 128] and inputs["c"] == [1, 1, 128]


def test_one_probability_per_512_samples():
    vad = SileroVad()
    assert len(vad.feed(np.zeros(CHUNK - 1, np.float32))) == 0
    assert len(vad.feed(np.zeros(1, np.float32))) == 1
    assert len(vad.feed(np.zeros(3 * CHUNK + 100, np.float32))) == 3
    assert vad.chunks_done == 4


def test_pieces_of_any_size_give_the_same_probabilities_as_one_call():
    pcm = clip("stream2.wav")
    vad = SileroVad()
    whole = vad.feed(pcm)
    vad.reset()
    rng = np.random.default_rng(0)
    parts, i = [], 0
    while i < len(pcm):
        k = int(rng.integers(1, 1500))
        parts.append(vad.feed(pcm[i : i + k]))
        i += k
    np.testing.assert_array_equal(np.concatenate(parts), whole)


def test_agrees_with_faster_whispers_own_batch_vad():
    from faster_whisper.vad import SileroVADModel

    pcm = clip("utt01.wav")
    n = len(pcm) // CHUNK * CHUNK
    ref = SileroVADModel(str(default_model_path()))(pcm[:n]).reshape(-1)
    ours = SileroVad().feed(pcm)
    np.testing.assert_allclose(ours, ref, atol=1e-2)


def test_state_is_carried_and_reset_restores_it():
    pcm = clip("utt03.wav")
    vad = SileroVad()
    carried = vad.feed(pcm)
    half = 40  # chunk index inside the speech
    fresh = SileroVad().feed(pcm[half * CHUNK :])
    # Starting cold in mid-speech gives different probabilities than the carried state.
    assert np.abs(fresh[:5] - carried[half : half + 5]).max() > 1e-3
    vad.reset()
    np.testing.assert_array_equal(vad.feed(pcm), carried)


@pytest.mark.parametrize("name", ["utt00.wav", "utt07.wav", "noisy.wav"])
def test_speech_clips_have_speech_where_the_voice_is(name):
    pcm = clip(name)
    p = SileroVad().feed(pcm)
    speech = np.nonzero(p > 0.5)[0]
    assert len(speech) * CHUNK / 16000 > 0.8  # most of the utterance
    lead = json.loads((DATA / "manifest.json").read_text())
    assert lead["sample_rate"] == 16000
    assert speech[0] * CHUNK / 16000 >= 0.3  # not in the leading silence


@pytest.mark.parametrize("name", ["silence.wav", "noise.wav"])
def test_silence_and_noise_never_cross_the_threshold(name):
    p = SileroVad().feed(clip(name))
    assert p.max() < 0.5
