"""The hard ASR set (tests/data/asr_hard): what its manifest promises, and that its
texts are fresh (none of them a `bench answers` question, nor sharing a 5-word run)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from voicepipe.bench.answers import SET_PATH, load_set
from voicepipe.bench.asr import read_clip
from voicepipe.core.text.wer import normalize

DATA = Path(__file__).resolve().parent.parent / "data" / "asr_hard"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
SPEECH = [c for c in MANIFEST["clips"] if c["finals"]]
TRAINED_HERE = {"heart", "hibari"}  # the teacher voice trained the project's TTS


def test_at_least_60_utterances_in_4_or_more_unseen_voices_at_10_to_20_db():
    assert len(SPEECH) >= 60
    voices = {c["voice"] for c in SPEECH}
    assert len(voices) >= 4 and not voices & TRAINED_HERE
    assert all(10.0 <= c["snr_db"] <= 20.0 for c in SPEECH)
    assert {c["noise"] for c in SPEECH} == {"pink", "brown", "babble", "cafe"}
    assert any(c["kind"] == "noise" and not c["finals"] for c in MANIFEST["clips"])


def test_every_clip_is_there_at_16_khz_with_noise_throughout():
    for c in MANIFEST["clips"]:
        pcm, sr = read_clip(DATA / c["file"])
        assert sr == 16000 and pcm.dtype == np.float32
        # the lead-in before speech is noise, not digital silence
        assert np.sqrt(np.mean(pcm[:4000] ** 2)) > 1e-4, c["file"]


def _grams(text: str, n: int = 5) -> set[tuple[str, ...]]:
    w = normalize(text).split()
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


def test_no_text_overlaps_the_answers_questions():
    questions = [t for item in load_set(SET_PATH).items for t in item.turns]
    assert len(questions) > 20
    asked = {normalize(q) for q in questions}
    asked_grams = set().union(*(_grams(q) for q in questions))
    for c in SPEECH:
        text = c["finals"][0]
        assert normalize(text) not in asked, text
        assert not _grams(text) & asked_grams, text


def test_texts_are_distinct_and_carry_numbers_names_and_questions():
    texts = [c["finals"][0] for c in SPEECH]
    assert len({normalize(t) for t in texts}) == len(texts)
    assert sum(t.endswith("?") for t in texts) >= 20
    numbers = {"five", "six", "ten", "twelve", "twenty", "thirty", "sixty", "hundred", "eleven"}
    assert sum(bool(numbers & set(normalize(t).split())) for t in texts) >= 8
