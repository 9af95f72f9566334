"""The separate P(end of turn) model (stages/llm/p_end.py, ``[turns] p_end_model``) with the
real 135M: a finished question scores high and an unfinished one low, exactly what the fast
profile's own streaming prefill reads in a fresh session (so ``bench eot``'s thresholds
hold); with the default 1.5B replying, a pause's estimate on the board comes from the
135M, the reply LLM's pass no longer posts, and the ASR's endpointer ends the turn on it."""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import pytest

from tests.stages.llm.test_prefill_ahead import Q1, _span, _turns, _with
from voicepipe import config
from voicepipe.audio import read_wav
from voicepipe.core.text.wer import wer
from voicepipe.core.turns.semantic import EndOfTurnBoard, eagerness, p_end_read
from voicepipe.frames import (
    Frame,
    SpanFrame,
    SpeechEnd,
    TranscriptFinal,
    TranscriptStable,
)
from voicepipe.stages.llm.p_end import SYSTEM_PROMPT, estimator_for
from voicepipe.stages.llm.stage import LlmStage

OPEN = "What is the capital of"
MEDIUM = eagerness("medium")
assert MEDIUM is not None


def _estimating(cfg: config.Config, model: str = "smollm2-135m") -> config.Config:
    return _with(cfg, p_end_model=model)


def test_the_estimator_reads_a_finished_question_high_and_a_cut_clause_low(cfg) -> None:
    est = estimator_for(_estimating(cfg))
    assert est is not None and est is estimator_for(_estimating(cfg))  # one per process
    finished, cut = est.estimate(Q1), est.estimate(OPEN)
    assert finished >= MEDIUM.p_hi  # the shortest pause ...
    assert cut <= MEDIUM.p_lo  # ... and the longest wait
    assert est.estimate(Q1) == finished  # the kept prefix changes nothing
    # a transcript longer than its cache: read from its last words, not refused
    assert 0.0 <= est.estimate("and then " * 200 + "that is all.") <= 1.0


async def test_the_estimator_reads_what_the_fast_profiles_own_prefill_reads(cfg, engine) -> None:
    # The fast profile (the engine fixture) has the estimator's system prompt: a fresh
    # session's pause pass reads the same P(end) (bit for bit: the same kernel over the
    # same rows), so bench eot's thresholds carry over.
    assert cfg.llm.system_prompt == SYSTEM_PROMPT
    est = estimator_for(_estimating(cfg))
    assert est is not None
    for text in (Q1, OPEN, "Tell me a joke.", "My number is five five five"):
        stage = LlmStage(_with(cfg, prefill_ahead=True), engine.fork())
        await stage.start()
        assert stage.ahead is not None
        p_own = await stage.ahead.on_pause(1, text, 0)
        await stage.stop()
        assert p_own is not None
        assert est.estimate(text) == pytest.approx(p_own, rel=1e-9), (
            text
        )  # the same model, prompt and kernel


@pytest.fixture(scope="module")
def default_cfg() -> config.Config:
    """The built-in defaults (the 1.5B replies) with the 135M reading P(end)."""
    c = config.load()
    c = dataclasses.replace(c, llm=dataclasses.replace(c.llm, max_new_tokens=8))
    return _estimating(_with(c, prefill_ahead=True, preempt=True))


async def test_with_the_default_llm_the_pause_estimate_comes_from_the_135m(default_cfg) -> None:
    assert default_cfg.llm.model == "qwen2.5-coder-1.5b"
    board = EndOfTurnBoard()
    stage = LlmStage(default_cfg, eot=board)
    assert board.estimator and board.source == "smollm2-135m"
    script = [
        [TranscriptStable(turn_id=1, text=Q1, speech_end_media_ns=1_000),
         TranscriptFinal(turn_id=1, text=Q1)],
    ]  # fmt: skip
    got = await _turns(stage, script)
    est = estimator_for(default_cfg)
    assert est is not None
    p = est.estimate(Q1)
    assert board.p_end(1, 1_000) == pytest.approx(p_end_read(p, Q1), rel=1e-4)
    assert board.latest is not None and board.latest.source == "smollm2-135m"
    # the reply LLM's pause pass ran (it prefilled the reply's prompt) but posted nothing
    assert stage.ahead is not None and stage.ahead.board is None
    assert stage.ahead.p_end is not None and board.posted == 1
    span = _span(got, "turns.p_end", 1).attrs
    assert span["model"] == "smollm2-135m" and span["p_end"] == pytest.approx(p, abs=1e-5)
    ttft = _span(got, "llm.ttft", 1).attrs
    assert ttft["preempt"] == "kept" and ttft["prefilled"] == 0  # the pause's pass, as before


async def test_the_endpointer_ends_the_turn_on_the_135ms_estimate(default_cfg) -> None:
    # ASR → the pause's transcript → the LLM stage (1.5B replies, the 135M estimates) →
    # the board → the ASR's endpointer: "Why is the sky blue?" then 480 ms of silence and
    # no more audio. The endpointer waits for the estimate it expects (board.estimator):
    # the turn ends only once the 135M's P(end) is posted.
    from tests.stages.test_asr import DATA, _trim, feed_lockstep, finals
    from voicepipe.nn.asr.whisper import WhisperAsr
    from voicepipe.stages.asr import AsrStage

    asr = WhisperAsr.from_config(default_cfg)
    b, sr = read_wav(DATA / "utt11.wav")
    pcm = np.concatenate([np.zeros(sr // 2, np.float32), _trim(b, sr)])
    pcm = np.concatenate([pcm, np.zeros(sr * 48 // 100, np.float32)])
    board = EndOfTurnBoard()
    llm = LlmStage(default_cfg, eot=board)
    stage = AsrStage(default_cfg, asr=asr, eot=board)
    out: list[Frame] = []
    llm_out: list[Frame] = []
    tasks: list[asyncio.Task[None]] = []

    async def to_llm(f: Frame) -> None:
        llm_out.append(f)

    async def collect(f: Frame) -> None:
        out.append(f)
        if isinstance(f, TranscriptStable):  # the LLM stage's part, as a pipeline wires it
            tasks.append(asyncio.create_task(llm.process(f)))

    llm.push = to_llm
    await llm.start()
    await stage.start()
    try:
        stage.push = collect
        await feed_lockstep(stage, pcm, sr)

        async def ended() -> None:
            while not any(isinstance(f, SpeechEnd) for f in out):  # noqa: ASYNC110
                await asyncio.sleep(0.005)

        await asyncio.wait_for(ended(), 120)  # no audio came after the 480 ms
        await stage.wait_idle()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
    finally:
        await stage.stop()
        await llm.stop()  # (cancels the tentative reply the pause started)
    (fin,) = finals(out)
    assert wer("Why is the sky blue?", fin.text) <= 0.2, fin.text
    (pause,) = [f.attrs for f in out if isinstance(f, SpanFrame) and f.name == "turns.pause"]
    est = estimator_for(default_cfg)
    assert est is not None
    (stable,) = [f for f in out if isinstance(f, TranscriptStable)]
    p = p_end_read(est.estimate(stable.text), stable.text)
    assert p >= MEDIUM.p_hi  # a finished question: the shortest pause
    assert pause["outcome"] == "silence" and pause["p_end"] == pytest.approx(p, rel=1e-4)
    assert board.latest is not None and board.latest.source == "smollm2-135m"
    (span,) = [f.attrs for f in llm_out if isinstance(f, SpanFrame) and f.name == "turns.p_end"]
    assert span["model"] == "smollm2-135m"
