"""Voice before text: while a voice turn is in flight, the /v1 API's model steps get a
budget, so a spoken question is not answered late because chat completions hold the cores.

The chat engine (stages/llm/chat_engine.py) runs one model step at a time on a worker thread;
a voice turn's ASR, LLM and TTS run on threads of their own. Two cores cannot serve both at
full speed, and a listener notices a late reply where an API client does not. So, while any
session of the process has a turn in flight (a final transcript heard, its reply not yet
finished), an API step of ``d`` seconds is followed by a pause of ``d * (1 - share) /
share`` (``server.api_share_while_voice``): the API keeps ``share`` of the time it would
have had. The pause is capped (a step that took long is not punished further) and ends as
soon as the voice turn does. ``share = 1``: no priority.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

MAX_PAUSE_S = 0.5  # one pause at most this long: then the busy check is made again
POLL_S = 0.02  # how soon a pause notices the voice turn ended


@dataclass(frozen=True)
class ApiBudget:
    """The rule alone (no clock, no I/O)."""

    share: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"server.api_share_while_voice: must be in (0, 1], got {self.share}")

    def pause_s(self, step_s: float, voice_busy: bool) -> float:
        """How long the API waits after a step of ``step_s`` seconds."""
        if not voice_busy or self.share >= 1.0 or step_s <= 0.0:
            return 0.0
        return min(MAX_PAUSE_S, step_s * (1.0 - self.share) / self.share)


class VoiceFirst:
    """The async side: ``await gate.after_step(step_s)`` between two API steps."""

    def __init__(self, budget: ApiBudget, voice_busy: Callable[[], bool]) -> None:
        self.budget = budget
        self.voice_busy = voice_busy
        self.paused_s = 0.0  # the API's pauses so far, in all (for tests and metrics)
        self.pauses = 0

    async def after_step(self, step_s: float) -> None:
        pause = self.budget.pause_s(step_s, self.voice_busy())
        if pause <= 0.0:
            return
        self.pauses += 1
        loop = asyncio.get_running_loop()
        end = loop.time() + pause
        t0 = loop.time()
        # voice_busy is read off the sessions, not signalled: polled, briefly.
        while loop.time() < end and self.voice_busy():  # noqa: ASYNC110
            await asyncio.sleep(min(POLL_S, end - loop.time()))
        self.paused_s += loop.time() - t0
