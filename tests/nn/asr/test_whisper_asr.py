"""Short-window Whisper: text, window size, no-speech gating, loop handling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voicepipe.audio import read_wav
from voicepipe.core.text.wer import wer
from voicepipe.nn.asr.whisper import WhisperAsr, cut_loop, periodic, repeats

DATA = Path(__file__).resolve().parents[2] / "data" / "asr"


@pytest.fixture(scope="module")
def asr() -> WhisperAsr:
    return WhisperAsr()  # the default tiny.en, int8, 2 threads, 3 s of padding


def test_window_is_the_audio_plus_padding_not_30_s(asr):
    pcm, _ = read_wav(DATA / "utt08.wav")
    h = asr.transcribe(pcm)
    assert wer("What time is it in Tokyo right now?", h.text) == 0.0
    # audio + 0.3 s lead + 0.3 s tail + 3 s pad, rounded up to whole seconds
    assert h.window_s == np.ceil(h.audio_s + 0.6 + 3.0 - 1e-9)
    assert h.window_s < 30 and h.no_speech_prob < 0.3 and not h.retried


@pytest.mark.parametrize("name", ["noise.wav", "silence.wav"])
def test_no_speech_probability_gates_what_whisper_makes_up(asr, name):
    """Fed straight to Whisper (no VAD), noise still gives no text."""
    pcm, _ = read_wav(DATA / name)
    h = asr.transcribe(pcm)
    assert h.text == ""
    assert h.no_speech_prob > asr.no_speech_threshold or not any(c.isalnum() for c in h.raw_text)


def test_same_input_same_output(asr):
    pcm, _ = read_wav(DATA / "utt02.wav")
    assert asr.transcribe(pcm).text == asr.transcribe(pcm).text  # dither is seeded


def test_loop_helpers():
    assert repeats("Add 3 up Add 3 up Add 3 up")
    assert cut_loop("Add 3 up Add 3 up Add 3 up") == "Add 3 up"
    assert cut_loop("Good morning, how are you? Good morning, how are") == (
        "Good morning, how are you?"
    )
    assert cut_loop("Turn on the kitchen lights.") == "Turn on the kitchen lights."
    assert not repeats("one two three four five six")
    assert periodic("Hello Hello") and periodic("bye bye bye") and not periodic("Hello.")
    assert cut_loop("bye bye") == "bye bye"  # too short to call a loop: only retried


def test_beam_size_per_call(asr):
    """Finals may search a beam while partials stay greedy on the same instance."""
    pcm, _ = read_wav(DATA / "utt03.wav")
    greedy = asr.transcribe(pcm, beam_size=1)
    beam = asr.transcribe(pcm, beam_size=5)
    assert wer("How many days are there in a leap year?", beam.text) <= 0.25
    assert greedy.text and beam.text
    with pytest.raises(ValueError, match="beam_size"):
        asr.transcribe(pcm, beam_size=0)


def test_a_decode_abandoned_after_the_encoder_returns_no_words(asr):
    """A partial whose audio a pause's decode will cover stops before the text decoder."""
    pcm, _ = read_wav(DATA / "utt03.wav")
    asked = []

    def abandon() -> bool:
        asked.append(True)
        return True

    h = asr.transcribe(pcm, retry=False, abandon=abandon)
    assert asked == [True] and h.abandoned and h.text == "" and h.decode_s == 0.0
    kept = asr.transcribe(pcm, retry=False, abandon=lambda: False)
    assert not kept.abandoned and kept.text == asr.transcribe(pcm, retry=False).text
