"""The voice-first budget's rule (stages/llm/voice_first.py), without a server."""

from __future__ import annotations

import pytest

from voicepipe.stages.llm.voice_first import MAX_HOLD_S, MAX_PAUSE_S, ApiBudget, VoiceFirst


def test_the_api_keeps_its_share_while_a_voice_turn_is_in_flight() -> None:
    b = ApiBudget(share=0.2)
    assert b.pause_s(0.05, voice_busy=True) == pytest.approx(0.2)  # 20 % of the time
    assert b.pause_s(0.05, voice_busy=False) == 0.0
    assert b.pause_s(10.0, voice_busy=True) == MAX_PAUSE_S
    assert ApiBudget(share=1.0).pause_s(0.05, voice_busy=True) == 0.0
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="api_share_while_voice"):
            ApiBudget(share=bad)


def test_share_zero_holds_every_step_while_a_voice_turn_is_in_flight() -> None:
    b = ApiBudget(share=0.0)
    assert b.hold_s(voice_busy=True) == MAX_HOLD_S > MAX_PAUSE_S  # bounded, not forever
    assert b.hold_s(voice_busy=False) == 0.0
    assert b.pause_s(0.05, voice_busy=True) == 0.0  # the hold before the next step does it
    assert ApiBudget(share=0.5).hold_s(voice_busy=True) == 0.0  # a share: pauses after


async def test_share_zero_holds_a_step_until_the_voice_turn_ends() -> None:
    busy = [True, True, True, False]
    gate = VoiceFirst(ApiBudget(share=0.0), lambda: busy.pop(0) if busy else False)
    await gate.before_step()
    assert busy == [] and gate.pauses == 1
    await gate.before_step()  # no turn in flight: no wait
    assert gate.pauses == 1


async def test_a_pause_ends_when_the_voice_turn_does() -> None:
    busy = [True, True, False]
    gate = VoiceFirst(ApiBudget(share=0.01), lambda: busy.pop(0) if busy else False)
    await gate.after_step(0.05)  # owed 0.5 s: polled until the turn ended, then returned
    assert busy == []  # asked three times: the rule, one poll while busy, one after
