"""Streaming prefill (stages/llm/ahead.py) with the real fast-profile model: a turn whose
words were prefilled while they were spoken, revisions included, gives the same reply
tokens as one prefilled only at the end; the reply then prefills only what is left; the
pause's pass posts P(end), high on a finished question and low on an unfinished one."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from voicepipe.config import Config
from voicepipe.core.turns.semantic import EndOfTurnBoard
from voicepipe.frames import (
    End,
    Frame,
    SpanFrame,
    TextChunk,
    TextDelta,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptStable,
)
from voicepipe.stages.llm.stage import LlmStage


def _with(cfg: Config, **turns) -> Config:
    return dataclasses.replace(cfg, turns=dataclasses.replace(cfg.turns, **turns))


async def _until(cond, timeout: float = 300.0) -> None:
    async def poll() -> None:
        while not cond():  # noqa: ASYNC110 - polls the stage's state, no event to wait on
            await asyncio.sleep(0.005)

    await asyncio.wait_for(poll(), timeout)


def _idle(stage: LlmStage) -> bool:
    """The stage took every frame given and its background pass is done."""
    a = stage.ahead
    assert a is not None
    work = stage._work
    return (
        len(stage.inbox) == 0
        and (work is None or work.done())
        and a._want is None
        and (a._task is None or a._task.done())
    )


async def _turns(stage: LlmStage, script: list[list[Frame]]) -> list[Frame]:
    """Run ``script`` (per turn: its frames, the last a final) and collect every frame; each
    turn's frames go in after the previous reply ended, waiting for the background passes
    between partials so the test is deterministic."""
    got: list[Frame] = []
    ends: dict[int, asyncio.Event] = {}

    async def sink(f: Frame) -> None:
        got.append(f)
        if isinstance(f, TextChunk) and f.last:
            ends.setdefault(f.turn_id, asyncio.Event()).set()

    stage.push = sink
    task = asyncio.create_task(stage.run())
    for frames in script:
        turn = frames[-1].turn_id
        for f in frames:
            await stage.put(f)
            if isinstance(f, TranscriptPartial) and stage.ahead is not None:
                await _until(lambda: _idle(stage))
        await asyncio.wait_for(ends.setdefault(turn, asyncio.Event()).wait(), 300)
    await stage.put(End())
    await asyncio.wait_for(task, 300)
    return got


def _reply(got: list[Frame], turn: int) -> str:
    return "".join(f.text for f in got if isinstance(f, TextDelta) and f.turn_id == turn)


def _span(got: list[Frame], name: str, turn: int) -> SpanFrame:
    (s,) = [f for f in got if isinstance(f, SpanFrame) and f.name == name and f.turn_id == turn]
    return s


Q1 = "What is the capital of France?"
Q2 = "And how many people live there?"


def _partials(turn: int, stables: list[str]) -> list[Frame]:
    return [TranscriptPartial(turn_id=turn, text=s, stable_prefix=s) for s in stables]


async def test_streamed_prefill_gives_the_same_reply_and_leaves_little_to_prefill(
    cfg, engine
) -> None:
    # The reference: the same settings, the words arriving only with the final.
    off = _with(cfg, prefill_ahead=True, preempt=False)
    script_ref = [[TranscriptFinal(turn_id=1, text=Q1)], [TranscriptFinal(turn_id=2, text=Q2)]]
    ref = await _turns(LlmStage(off, engine.fork()), script_ref)

    on = _with(cfg, prefill_ahead=True, preempt=False)
    stage = LlmStage(on, engine.fork())
    script = [
        [*_partials(1, ["What", "What is the", "What is the capital of"]),
         TranscriptFinal(turn_id=1, text=Q1)],
        # Turn 2: Whisper revises a word ("a" → "how many"), and the last word of the
        # agreed text ("peop") is cut: both roll back to the common token prefix.
        [*_partials(2, ["And", "And a", "And how many peop"]),
         TranscriptFinal(turn_id=2, text=Q2)],
    ]  # fmt: skip
    got = await _turns(stage, script)

    for turn in (1, 2):
        assert _reply(got, turn) == _reply(ref, turn) != ""  # token-identical greedy replies
        ahead = _span(got, "llm.prefill_ahead", turn)
        ttft, ttft_ref = _span(got, "llm.ttft", turn), _span(ref, "llm.ttft", turn)
        assert ttft.attrs["prompt_tokens"] == ttft_ref.attrs["prompt_tokens"]
        assert ahead.attrs["passes"] >= 3 and ahead.attrs["texts"] == 3
        assert ahead.attrs["kept"] >= 3  # the agreed words' tokens the reply found
        # The reply ran only what the streamed prefill had not.
        assert ttft.attrs["prefilled"] < ttft_ref.attrs["prefilled"]
        assert ttft.attrs["prefilled"] + ahead.attrs["kept"] <= ttft_ref.attrs["prefilled"]
    assert _span(got, "llm.prefill_ahead", 1).attrs["rolled_back"] == 0
    assert _span(got, "llm.prefill_ahead", 2).attrs["rolled_back"] > 0
    assert "Paris" in _reply(got, 1)


async def test_the_pause_posts_p_end_and_the_tentative_reply_builds_on_it(cfg, engine) -> None:
    board = EndOfTurnBoard()
    ref = await _turns(
        LlmStage(_with(cfg, prefill_ahead=True, preempt=False), engine.fork()),
        [[TranscriptFinal(turn_id=1, text=Q1)]],
    )
    stage = LlmStage(_with(cfg, prefill_ahead=True, preempt=True), engine.fork(), eot=board)
    script = [
        [*_partials(1, ["What is", "What is the capital"]),
         TranscriptStable(turn_id=1, text=Q1, speech_end_media_ns=1_000),
         TranscriptFinal(turn_id=1, text=Q1)],
    ]  # fmt: skip
    got = await _turns(stage, script)
    assert _reply(got, 1) == _reply(ref, 1)
    p_finished = board.p_end(1, 1_000)
    assert p_finished is not None and p_finished > 0.3
    assert _span(got, "llm.ttft", 1).attrs["preempt"] == "kept"
    # The pause's pass fed the assistant header too and held the logits after it: the
    # tentative reply ran no prompt pass before its first token.
    assert _span(got, "llm.ttft", 1).attrs["prefilled"] == 0
    assert _span(got, "llm.prefill_ahead", 1).attrs["p_end"] == pytest.approx(p_finished, abs=1e-3)

    # An unfinished clause scores far lower than the finished question.
    stage2 = LlmStage(_with(cfg, prefill_ahead=True, preempt=False), engine.fork(), eot=board)
    await stage2.start()
    assert stage2.ahead is not None
    p_open = await stage2.ahead.on_pause(7, "What is the capital of", 5)
    assert p_open is not None and p_open < p_finished / 3
    assert board.p_end(7, 5) == p_open
    await stage2.stop()


async def test_a_pause_on_the_last_partials_words_posts_its_p_end_before_the_pass(
    cfg, engine
) -> None:
    # The reference: P(end) of the finished question read by the pause's own pass.
    ref_board = EndOfTurnBoard()
    off = _with(cfg, prefill_ahead=True, preempt=False)
    ref_stage = LlmStage(off, engine.fork(), eot=ref_board)
    await ref_stage.start()
    assert ref_stage.ahead is not None
    p_ref = await ref_stage.ahead.on_pause(1, Q1, 1_000)
    assert ref_stage.ahead.pause_timing["known"] == 0.0
    await ref_stage.stop()
    ref = await _turns(
        LlmStage(_with(cfg, prefill_ahead=True, preempt=False), engine.fork()),
        [[TranscriptFinal(turn_id=1, text=Q1)]],
    )

    # The last partial (not yet agreed on) already says what the pause's transcript says.
    script = [
        [TranscriptPartial(turn_id=1, text="What is the", stable_prefix=""),
         TranscriptPartial(turn_id=1, text=Q1, stable_prefix="What is the"),
         TranscriptStable(turn_id=1, text=Q1, speech_end_media_ns=1_000),
         TranscriptFinal(turn_id=1, text=Q1)],
    ]  # fmt: skip
    # Fed only the agreed words ("What is the"), the pause's pass reads P(end) itself.
    agreed = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, prefill_partials="agreed"))
    board = EndOfTurnBoard()
    stage = LlmStage(_with(agreed, prefill_ahead=True, preempt=True), engine.fork(), eot=board)
    got = await _turns(stage, script)
    assert _span(got, "turns.p_end", 1).attrs["known"] == 0.0
    assert _reply(got, 1) == _reply(ref, 1)

    every = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, prefill_partials="all"))
    board = EndOfTurnBoard()
    stage = LlmStage(_with(every, prefill_ahead=True, preempt=True), engine.fork(), eot=board)
    got = await _turns(stage, script)
    assert _reply(got, 1) == _reply(ref, 1) != ""  # token-identical greedy reply
    p_end = _span(got, "turns.p_end", 1).attrs
    assert p_end["known"] == 1.0  # posted from the background pass, before the pause's pass
    assert p_end["post_ms"] <= p_end["pass_ms"]
    assert board.p_end(1, 1_000) == pytest.approx(p_ref, rel=1e-4)
    # The pause's pass ran only the template's end of the user's turn and the assistant
    # header (no word again), and the tentative reply no prompt pass before its first token.
    assert stage.ahead is not None
    assert p_end["rows"] == stage.ahead._suffix_len() > 0
    assert _span(got, "llm.ttft", 1).attrs["preempt"] == "kept"
    assert _span(got, "llm.ttft", 1).attrs["prefilled"] == 0


async def test_a_partial_without_the_finals_capital_still_leaves_its_words_in_the_cache(
    cfg, engine
) -> None:
    # Whisper often writes a partial of audio cut mid-sentence in lower case; the final of
    # the whole turn then begins with a capital.
    ref = await _turns(
        LlmStage(_with(cfg, prefill_ahead=True, preempt=False), engine.fork()),
        [[TranscriptFinal(turn_id=1, text=Q1)]],
    )
    stage = LlmStage(_with(cfg, prefill_ahead=True, preempt=False), engine.fork())
    got = await _turns(
        stage,
        [
            [
                *_partials(1, ["what is", "what is the capital of"]),
                TranscriptFinal(turn_id=1, text=Q1),
            ]
        ],
    )
    assert _reply(got, 1) == _reply(ref, 1) != ""
    ahead = _span(got, "llm.prefill_ahead", 1).attrs
    assert ahead["kept"] >= 5 and ahead["rolled_back"] == 0  # "What is the capital of"
