"""The whole assistant on its default models: a real server, real audio, real models.

One spoken question goes in; the test checks the transcript, that a reply was
written and spoken, that the spoken reply says what was written (round-trip
WER with the default ASR), and that every §9 span came back. A second test
talks over a long reply (barge-in) and checks that it stops and that the
LLM's context keeps only what was heard. A third answers the same question
with and without preemptive generation: the preempted turn is kept and says
what the plain one says.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.profile import fast
from voicepipe import config, pipelines
from voicepipe.audio import read_wav
from voicepipe.client import ClientSession
from voicepipe.core.text.wer import wer
from voicepipe.roundtrip import transcribe
from voicepipe.server.app import Server
from voicepipe.tracing import SPAN_NAMES

DATA = Path(__file__).resolve().parent.parent / "data" / "asr"


def _clip(name: str) -> tuple[object, int, str]:
    clips = json.loads((DATA / "manifest.json").read_text())["clips"]
    ref = next(c["finals"][0] for c in clips if c["file"] == name)
    pcm, sr = read_wav(DATA / name)
    return pcm, sr, ref


@pytest.fixture(scope="module")
def cfg() -> config.Config:
    return fast()


async def _ask(c: config.Config, pcm, sr: int, **client) -> tuple[object, dict]:
    """One client session against a fresh assistant server; (result, its JSON)."""
    server = Server(c, pipeline="assistant", port=0)
    await server.start()
    try:
        res = await ClientSession(server.ws_url, pcm, sr, c, timeout_s=120, **client).run()
    finally:
        await server.close()
    out = res.to_json()
    assert out["ok"], out
    return res, out


def _answered(out: dict, ref: str) -> dict:
    """The one turn with a transcript: heard right, answered in text and in audio."""
    (turn,) = [t for t in out["turns"] if t["transcript"]]
    assert wer(ref, turn["transcript"]) <= 0.2, turn["transcript"]
    assert turn["reply_text"].strip() and turn["reply_audio_s"] > 0.5, turn
    assert set(SPAN_NAMES) <= set(turn["latency_ms"]), sorted(turn["latency_ms"])
    return turn


async def test_spoken_question_gets_a_spoken_answer(cfg: config.Config) -> None:
    pcm, sr, ref = _clip("utt11.wav")  # "Why is the sky blue?"
    res, out = await _ask(cfg, pcm, sr, trailing_silence_s=1.5)
    turn = _answered(out, ref)
    heard = transcribe(
        res.turns[turn["turn_id"]].audio().astype("float32") / 32768.0, res.output_sample_rate
    )
    assert wer(turn["reply_text"], heard) <= 0.2, (turn["reply_text"], heard)
    assert all(v >= 0 for v in turn["latency_ms"].values())


@pytest.mark.parametrize(
    ("batching", "judged"),
    [(False, False), (True, False), (False, True)],
    ids=["alone", "batched", "judged"],
)
async def test_barge_in_stops_the_reply_and_truncates_the_context(
    cfg: config.Config, monkeypatch: pytest.MonkeyPatch, batching: bool, judged: bool
) -> None:
    """(batched: the reply's steps run in the process's LLM batch scheduler, llm.batching;
    judged: barge-in by words, turns.backchannel, which waits for the first partial
    transcript of "Hello", so how soon it stops is the ASR's speed: bench turns measures
    it; onset barge-in stops within about a chunk)"""
    from voicepipe.stages.llm.stage import LlmStage

    cfg = dataclasses.replace(
        cfg,
        llm=dataclasses.replace(cfg.llm, batching=batching),
        turns=dataclasses.replace(cfg.turns, backchannel=judged),
    )

    built: list[LlmStage] = []
    real_build = pipelines.build

    def spy(name, c, session):
        stages = real_build(name, c, session)
        built.extend(s for s in stages if isinstance(s, LlmStage))
        return stages

    monkeypatch.setattr(pipelines, "build", spy)
    pcm, sr, _ = _clip("utt13.wav")  # "Tell me a short story about a brave little robot…"
    hello, hsr, _ = _clip("utt12.wav")  # "Hello."
    assert hsr == sr
    _, out = await _ask(cfg, pcm, sr, trailing_silence_s=0.5, barge_in=hello, barge_in_after_s=1.0)
    spoken = sorted((t for t in out["turns"] if t["transcript"]), key=lambda t: t["turn_id"])
    assert len(spoken) == 2, [t["transcript"] for t in spoken]  # the question, then "Hello"
    first, second = spoken
    assert first["interrupted"], first
    if not judged:  # It stopped within about a chunk of the barge-in: far less than a story.
        assert first["reply_audio_s"] < 4.0, first
    assert second["transcript"] and second["reply_text"], second
    (llm,) = built
    msgs = [m for m in llm.messages if m["role"] != "system"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    heard = msgs[1]["content"]
    # The context keeps only the heard prefix of what was written, not the whole reply.
    written = first["reply_text"].split()
    assert heard.split() == written[: len(heard.split())]
    assert len(heard.split()) < len(written), (heard, first["reply_text"])


async def test_a_preempted_turn_is_kept_and_says_what_it_would_have_said(
    cfg: config.Config,
) -> None:
    # A 1 s endpoint silence: the stable text (after turns.preempt_after_ms) comes well before
    # the final however loaded the machine is, so the preempted turn must be kept.
    pcm, sr, ref = _clip("utt08.wav")  # "What time is it in Tokyo right now?"
    got = {}
    for preempt in (False, True):
        c = dataclasses.replace(
            cfg,
            vad=dataclasses.replace(cfg.vad, end_silence_ms=1000),
            llm=dataclasses.replace(cfg.llm, max_new_tokens=32),  # short replies: a quicker test
            turns=dataclasses.replace(cfg.turns, preempt=preempt),
        )
        res, out = await _ask(c, pcm, sr, trailing_silence_s=2.0)
        turn = _answered(out, ref)
        llm_spans = [s for s in res.spans if s.name.startswith("llm.")]
        assert {s.attrs["preempt"] for s in llm_spans} == {"kept" if preempt else "off"}
        got[preempt] = turn
    if got[True]["transcript"] == got[False]["transcript"]:  # greedy: same words, same reply
        assert got[True]["reply_text"] == got[False]["reply_text"]
