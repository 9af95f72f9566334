"""Voice before text: while a voice turn is in flight, the /v1 API's model steps get a
budget, so a spoken question is not answered late because chat completions hold the cores.

The chat engine (stages/llm/chat_engine.py) runs one model step at a time on a worker thread;
a voice turn's ASR, LLM and TTS run on threads of their own. Two cores cannot serve both at
full speed, and a listener notices a late reply where an API client does not. So, while any
session of the process has a turn in flight (from the user's first speech to the end of
the reply: core/turns/activity.py), an API step of ``d`` seconds is followed by a pause
of ``d * (1 - share) / share`` (``server.api_share_while_voice``): the API keeps
``share`` of the time it would have had. The pause is capped (a step that took long is
not punished further) and ends as soon as the voice turn does. ``share = 1``: no
priority. ``share = 0``: the API waits for the voice turn to end, at most ``MAX_HOLD_S``
between two of its steps (a session that hears speech for minutes does not starve the
API outright). Even then a voice turn can wait for one API step: a step already running
is not interrupted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

MAX_PAUSE_S = 0.5  # one pause at most this long: then the busy check is made again
MAX_HOLD_S = 5.0  # share 0: the longest the API waits for voice turns between two steps
POLL_S = 0.02  # how soon a pause notices the voice turn ended


@dataclass(frozen=True)
class ApiBudget:
    """The rule alone (no clock, no I/O)."""

    share: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"server.api_share_while_voice: must be in [0, 1], got {self.share}")

    def pause_s(self, step_s: float, voice_busy: bool) -> float:
        """How long the API waits after a step of ``step_s`` seconds (it stops waiting
        as soon as no voice turn is in flight)."""
        if not voice_busy or self.share >= 1.0 or self.share == 0.0 or step_s <= 0.0:
            return 0.0  # (share 0 waits before each step instead: hold_s)
        return min(MAX_PAUSE_S, step_s * (1.0 - self.share) / self.share)

    def hold_s(self, voice_busy: bool) -> float:
        """How long the API may wait before a step: share 0 only (a request's first step,
        its prompt, waits too), bounded."""
        return MAX_HOLD_S if voice_busy and self.share == 0.0 else 0.0


class VoiceFirst:
    """The async side: ``await gate.before_step()`` and ``await gate.after_step(step_s)``
    around each API step."""

    def __init__(self, budget: ApiBudget, voice_busy: Callable[[], bool]) -> None:
        self.budget = budget
        self.voice_busy = voice_busy
        self.paused_s = 0.0  # the API's pauses so far, in all (for tests and metrics)
        self.pauses = 0

    async def before_step(self) -> None:
        await self._wait(self.budget.hold_s(self.voice_busy()))

    async def after_step(self, step_s: float) -> None:
        await self._wait(self.budget.pause_s(step_s, self.voice_busy()))

    async def _wait(self, pause: float) -> None:
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
