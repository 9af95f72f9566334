"""The barge-in stage: onset alone with no reply in flight; during a reply, by the words."""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import pytest

from tests.stages._frames import sink
from voicepipe.clock import now_ns
from voicepipe.config import TurnsConfig
from voicepipe.core.playout.speaker import Speaker
from voicepipe.core.turns.semantic import EndOfTurnBoard
from voicepipe.frames import (
    Frame,
    InputEnd,
    Interrupt,
    PlaybackReport,
    PlayoutHold,
    ReplyWords,
    SpanFrame,
    SpeechEnd,
    SpeechStart,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptStable,
)
from voicepipe.pipeline import Pipeline
from voicepipe.stages import turns
from voicepipe.stages.turns import BargeIn

REPLY = "The capital of France is Paris, a city on the Seine."


async def _run(
    frames: list[Frame],
    cfg: TurnsConfig | None = None,
    eot: EndOfTurnBoard | None = None,
    speaker: Speaker | None = None,
) -> tuple[list[Frame], BargeIn]:
    out: list[Frame] = []
    stage = BargeIn(cfg, speaker, eot=eot)
    p = Pipeline([stage], sink(out))
    await p.start()
    for f in frames:
        await p.put(f)
        await asyncio.sleep(0.01)  # system frames (ReplyWords) in the order given
    await p.put(InputEnd())
    for _ in range(500):
        if any(isinstance(f, InputEnd) for f in out):
            break
        await asyncio.sleep(0.01)
    await p.stop()
    return out, stage


def _question(turn: int = 1) -> list[Frame]:
    """Turn ``turn`` asked a question; the LLM began its reply."""
    return [
        SpeechStart(turn_id=turn, media_ns=0),
        SpeechEnd(turn_id=turn, media_ns=1),
        TranscriptFinal(turn_id=turn, text="What is the capital of France?"),
        ReplyWords(turn_id=turn, text=REPLY),
    ]


def _overlap(turn: int, partial: str, final: str) -> list[Frame]:
    return [
        SpeechStart(turn_id=turn, media_ns=5),
        TranscriptPartial(turn_id=turn, text=partial),
        SpeechEnd(turn_id=turn, media_ns=6),
        TranscriptFinal(turn_id=turn, text=final),
    ]


def _interrupts(out: list[Frame]) -> list[int]:
    return [f.turn_id for f in out if isinstance(f, Interrupt)]


def _verdicts(out: list[Frame]) -> list[str]:
    return [f.attrs["verdict"] for f in out if isinstance(f, SpanFrame)]


def _holds(out: list[Frame]) -> list[bool]:
    return [f.hold for f in out if isinstance(f, PlayoutHold)]


async def test_a_turn_with_no_reply_in_flight_interrupts_at_onset() -> None:
    out, _ = await _run(_question(1))
    assert _interrupts(out) == [1]
    kinds = [type(f) for f in out]
    assert kinds.index(Interrupt) < kinds.index(SpeechStart)  # before any of the turn


async def test_a_backchannel_during_a_reply_never_reaches_the_llm() -> None:
    out, stage = await _run(_question(1) + _overlap(2, "Mm-hmm", "Mm-hmm."))
    assert _interrupts(out) == [1]
    assert not [f for f in out if f.turn_id == 2 and not isinstance(f, SpanFrame | PlayoutHold)]
    assert _verdicts(out) == ["backchannel"]
    assert stage.verdicts["backchannel"] == 1
    # The reply was paused at the onset and resumed by the verdict, in that order.
    assert _holds(out) == [True, False]
    kinds = [type(f) for f in out]
    assert kinds.index(PlayoutHold) < kinds.index(SpanFrame)


async def test_the_assistants_echo_never_reaches_the_llm() -> None:
    out, _ = await _run(_question(1) + _overlap(2, "the capital of", "The capital of France is"))
    assert _interrupts(out) == [1]
    assert _verdicts(out) == ["echo"]
    assert not [f for f in out if isinstance(f, TranscriptFinal) and f.turn_id == 2]


async def test_an_interruption_cuts_the_reply_and_goes_on_as_a_turn() -> None:
    out, _ = await _run(_question(1) + _overlap(2, "Wait, stop", "Wait, stop. I meant Spain."))
    assert _interrupts(out) == [1, 2]
    assert _verdicts(out) == ["interrupt"]
    turn2 = [
        f for f in out if f.turn_id == 2 and not isinstance(f, SpanFrame | Interrupt | PlayoutHold)
    ]
    # Every held frame, in the ASR's order, after the Interrupt.
    assert [type(f) for f in turn2] == [SpeechStart, TranscriptPartial, SpeechEnd, TranscriptFinal]
    kinds = [(type(f), f.turn_id) for f in out]
    assert kinds.index((Interrupt, 2)) < kinds.index((SpeechStart, 2))
    # Paused at the onset, never resumed: the Interrupt cuts it instead.
    assert _holds(out) == [True]
    assert kinds.index((PlayoutHold, 2)) < kinds.index((Interrupt, 2))


def _at_level(frames: list[Frame], level_db: float) -> list[Frame]:
    return [
        dataclasses.replace(f, level_db=level_db)
        if isinstance(f, TranscriptPartial | TranscriptFinal)
        else f
        for f in frames
    ]


async def test_words_far_quieter_than_the_users_voice_are_the_echos_residue() -> None:
    # The user asked at -16 dBFS; Whisper made "Thank you, no." of the canceller's
    # residue at -33 while the reply played: echo, and the reply goes on.
    frames = _at_level(_question(1), -16.0) + _at_level(
        _overlap(2, "Thank you", "Thank you, no."), -33.0
    )
    out, _ = await _run(frames)
    assert _interrupts(out) == [1]
    assert _verdicts(out) == ["echo"]
    span = next(f for f in out if isinstance(f, SpanFrame))
    assert span.attrs["level_db"] == -33.0 and span.attrs["quiet_below_db"] == -26.0
    # The same words at the user's own level are the user's.
    frames = _at_level(_question(1), -16.0) + _at_level(
        _overlap(2, "Thank you", "Thank you, no."), -17.0
    )
    out, _ = await _run(frames)
    assert _interrupts(out) == [1, 2] and _verdicts(out) == ["interrupt"]


async def test_a_cough_with_no_words_is_a_backchannel() -> None:
    cough = [SpeechStart(turn_id=2, media_ns=5), SpeechEnd(turn_id=2, media_ns=6, accepted=False)]
    out, _ = await _run(_question(1) + cough)
    assert _interrupts(out) == [1]
    assert _verdicts(out) == ["backchannel"]


async def test_speech_that_goes_on_undecided_interrupts_after_max_wait() -> None:
    cfg = dataclasses.replace(TurnsConfig(), overlap_max_wait_ms=100)
    frames = [*_question(1), SpeechStart(turn_id=2, media_ns=5)]
    out: list[Frame] = []
    stage = BargeIn(cfg)
    p = Pipeline([stage], sink(out))
    await p.start()
    for f in frames:
        await p.put(f)
        await asyncio.sleep(0.01)
    for _ in range(200):
        if 2 in _interrupts(out):
            break
        await asyncio.sleep(0.01)
    await p.stop()
    assert _interrupts(out) == [1, 2]
    assert _verdicts(out) == ["interrupt"]


async def test_after_the_reply_played_a_yes_is_a_turn_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(turns, "ECHO_TAIL_NS", 0)  # no echo tail after the reply
    done = PlaybackReport(
        turn_id=1, reply_turn=1, played_samples=16000, sample_rate=16000, done=True
    )
    out, _ = await _run([*_question(1), done, *_overlap(2, "Yes", "Yes.")])
    assert _interrupts(out) == [1, 2]
    assert any(isinstance(f, TranscriptFinal) and f.turn_id == 2 for f in out)


async def test_backchannel_off_restores_onset_barge_in() -> None:
    cfg = dataclasses.replace(TurnsConfig(), backchannel=False)
    out, _ = await _run(_question(1) + _overlap(2, "Mm-hmm", "Mm-hmm."), cfg)
    assert _interrupts(out) == [1, 2]
    assert any(isinstance(f, TranscriptFinal) and f.turn_id == 2 for f in out)
    assert _holds(out) == []


async def test_pause_on_speech_off_lets_the_reply_play_while_judged() -> None:
    cfg = dataclasses.replace(TurnsConfig(), pause_on_speech=False)
    out, _ = await _run(_question(1) + _overlap(2, "Mm-hmm", "Mm-hmm."), cfg)
    assert _verdicts(out) == ["backchannel"]
    assert _holds(out) == []


async def _run_with_speaker(frames: list[Frame], speaker: Speaker) -> list[Frame]:
    return (await _run(frames, TurnsConfig(), speaker=speaker))[0]


def _speaker_playing(words_then: str, words_now: str) -> Speaker:
    """A Speaker whose reply said ``words_then`` 10 s ago and is saying ``words_now``."""
    sp = Speaker(16000)
    t0 = now_ns() - 10_000_000_000
    sp.chunk(1, words_then, 0)
    sp.chunk(1, words_now, 16000 * 10 - 8000)  # the last half second up to now, and on
    for i in range(0, 16000 * 11, 320):
        sp.sent(1, t0 + i * 1_000_000_000 // 16000, 320, 16000, np.zeros(320, np.float32))
    return sp


async def test_echo_is_judged_against_the_words_just_played_not_the_whole_reply() -> None:
    sp = _speaker_playing("The capital of France is Paris.", "It lies on the Seine.")
    # The words played just now come back: echo.
    out = await _run_with_speaker(_question(1) + _overlap(2, "on the Seine", "On the Seine."), sp)
    assert _verdicts(out) == ["echo"]
    # Words the reply said ten seconds ago, said by the user now: theirs, an interruption.
    sp = _speaker_playing("The capital of France is Paris.", "It lies on the Seine.")
    out = await _run_with_speaker(
        _question(1) + _overlap(2, "capital of France", "The capital of France, Paris?"), sp
    )
    assert _verdicts(out) == ["interrupt"]
    assert _interrupts(out) == [1, 2]


async def test_the_duration_rule_waits_for_the_speaker_to_play_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Undecided speech while the client still has seconds of the paused reply to play
    is likely its echo: the duration rule waits until the speaker is silent."""
    monkeypatch.setattr(turns, "AFTER_SPEAKER_NS", 100_000_000)
    sp = Speaker(16000)
    t0 = now_ns()
    for i in range(0, 16000 * 10, 320):  # 10 s of reply audio the client has yet to play
        sp.sent(1, t0 + i * 1_000_000_000 // 16000, 320, 16000, np.zeros(320, np.float32))
    cfg = dataclasses.replace(TurnsConfig(), overlap_max_wait_ms=100)
    out: list[Frame] = []
    p = Pipeline([BargeIn(cfg, sp)], sink(out))
    await p.start()
    for f in [*_question(1), SpeechStart(turn_id=2, media_ns=5)]:
        await p.put(f)
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.5)
    assert _verdicts(out) == []  # past max_wait_ms, but the speaker still plays
    sp.done(1, played_samples=16000 * 6 // 10, sample_rate=16000)  # it stopped at 0.6 s
    for _ in range(300):
        if _verdicts(out):
            break
        await asyncio.sleep(0.01)
    await p.stop()
    assert _verdicts(out) == ["interrupt"]
    (span,) = [f for f in out if isinstance(f, SpanFrame)]
    assert span.end_ns >= sp.silent_from() + 100_000_000


async def test_a_pause_held_for_the_judge_gets_no_estimate_so_silence_ends_it() -> None:
    """The endpointer waits for the LLM's P(end) of a pause; a turn held over a reply never
    reaches the LLM, so the board says none will come (else the endpoint, and with it the
    judge, which waits for the end, would wait the longest pause)."""
    board = EndOfTurnBoard()
    said = [
        SpeechStart(turn_id=2, media_ns=5),
        TranscriptStable(turn_id=2, text="Yeah.", speech_end_media_ns=777),
        SpeechEnd(turn_id=2, media_ns=6),
        TranscriptFinal(turn_id=2, text="Yeah."),
    ]
    out, _ = await _run(_question(1) + said, eot=board)
    assert _verdicts(out) == ["backchannel"]
    assert board.declined(2, 777) and not board.declined(1, 777)
    # A turn not held (no reply in flight) goes to the LLM: nothing declined here.
    board2 = EndOfTurnBoard()
    await _run(said, eot=board2)
    assert not board2.declined(2, 777)
