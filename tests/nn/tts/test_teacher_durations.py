"""[tts] durations = "teacher": hibari's own durations from the cut of its graph."""

from __future__ import annotations

import pytest

from voicepipe import config
from voicepipe.config import TtsConfig
from voicepipe.nn.tts.codec_lm_decode import plan
from voicepipe.nn.tts.codec_tts import CodecLMTTS
from voicepipe.nn.tts.hibari_teacher import HibariTeacher, text_to_ids
from voicepipe.nn.tts.teacher_durations import teacher_durations

TEXTS = (
    "The capital of France is Paris.",
    "Schadenfreude is a German word, and it means joy at someone else's trouble!",
)


@pytest.mark.parametrize("text", TEXTS)
def test_the_cut_graph_gives_the_durations_of_a_whole_synthesis(text: str) -> None:
    ids = text_to_ids(text)
    assert teacher_durations()(ids) == HibariTeacher().synthesize_ids(ids).durations


def test_pace_slows_the_teacher_down_and_must_be_positive() -> None:
    ids = text_to_ids(TEXTS[0])
    d = teacher_durations()
    assert sum(d(ids, 2.0)) > 1.6 * sum(d(ids, 1.0))
    with pytest.raises(ValueError, match="pace"):
        d(ids, 0.0)


def test_the_codec_lm_plans_on_the_teachers_durations_when_configured() -> None:
    cfg = config.load(None, ["tts.durations=teacher"])
    tts = CodecLMTTS.from_config(cfg)
    assert tts.durations == "teacher"
    ids = text_to_ids(TEXTS[0])
    ((_, got_ids, al),) = tts.plans(TEXTS[0])
    want = plan(tts.m, ids, teacher_durations()(ids))[1]
    assert got_ids == ids and al.n_frames == want.n_frames
    assert (al.index == want.index).all()
    predicted = plan(tts.m, ids)[1]  # the duration predictor's differs from the teacher's
    assert predicted.n_frames != want.n_frames or (predicted.index != want.index).any()
    codes, _, _ = tts.decode_codes(TEXTS[0], TtsConfig(rule="ar"))
    assert len(codes) == want.n_frames


def test_an_unknown_duration_source_names_the_key() -> None:
    cfg = config.load(None, ["tts.durations=oracle"])
    with pytest.raises(ValueError, match="tts.durations"):
        CodecLMTTS.from_config(cfg)


def test_predicted_durations_remain_a_choice() -> None:
    tts = CodecLMTTS.from_config(config.load(None, ["tts.durations=predicted"]))
    ids = text_to_ids(TEXTS[0])
    ((_, _, al),) = tts.plans(TEXTS[0])
    assert (al.index == plan(tts.m, ids)[1].index).all()
