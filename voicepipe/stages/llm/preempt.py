"""The LLM stage's replies and preemptive generation (core/turns/preempt.py decides).

``Preempter`` is what ``LlmStage`` holds to start a tentative reply on a
``TranscriptStable``, hold its output (stages/llm/reply.py), and release (``commit``) or
drop (``cancel``) it when the final transcript comes. Not a stage.

Preemptive generation (core/turns/preempt.py, ``turns.preempt``): a
``TranscriptStable`` starts a *tentative* reply in a background task while
the endpointer still waits. Everything it would push (text, chunks, spans,
metrics) is held here, so the TTS, the client and the conversation memory see
nothing of it, until the ``TranscriptFinal``: if it agrees the held frames go
out at once and the reply continues as this stage's work (an Interrupt stops
it as usual); otherwise (or on ``SpeechResumed``, a newer stable text, or an
Interrupt) the task is cancelled and its frames dropped, and a differing
final is answered the normal way. The engine's KV cache needs no undo: the
next prompt reuses only its common prefix. Every span carries
``attrs["preempt"]``: ``off`` (no tentative reply for the turn), ``kept`` or
``cancelled`` (a tentative reply was dropped and this is the normal one); a
MetricsFrame with source ``preempt`` counts each outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from voicepipe.clock import now_ns
from voicepipe.core.turns.preempt import Decision, Preemption
from voicepipe.frames import MetricsFrame, SpanFrame, TranscriptStable
from voicepipe.stages.llm.reply import Push, Reply

log = logging.getLogger(__name__)


class Preempter:
    """Tentative replies of one ``LlmStage``: ``policy`` decides (core/turns/preempt.py),
    this carries it out with the stage's ``generate`` and ``remember``."""

    def __init__(
        self,
        policy: Preemption,
        push: Push,
        generate: Callable[[Reply], Coroutine[Any, Any, None]],
        remember: Callable[[Reply], None],
    ) -> None:
        self.policy = policy
        self.push = push
        self.generate = generate
        self.remember = remember
        self.tentative: Reply | None = None

    async def apply(self, d: Decision, turn: int, stable: TranscriptStable | None = None) -> None:
        if d.cancel is not None and self.tentative is not None:
            r, self.tentative = self.tentative, None
            await self.cancel(r, "preempt")
        if d.start is not None and stable is not None:
            r = Reply(turn, d.start, stable.t_ns, self.push, preempt="tentative", held=[])
            r.task = asyncio.create_task(self.generate(r), name=f"llm:tentative:{turn}")
            self.tentative = r

    async def cancel(self, r: Reply, reason: str) -> None:
        r.cancelled = True
        r.held = None
        task = r.task
        if task is not None:
            task.cancel()
            await asyncio.wait({task})  # raises only if this stage itself is being cancelled
            if not task.cancelled() and task.exception() is not None:
                # A reply nobody will hear failed: worth a log line, not the session.
                log.warning("tentative reply failed: %r", task.exception())
        await self.push(MetricsFrame(turn_id=r.turn, source="preempt", values={"cancelled": 1}))

    async def commit(self, r: Reply, final_ns: int) -> None:
        """The final agreed: release what the tentative reply held, in order, at once."""
        r.preempt = "kept"
        r.committed.set()  # its tool calls may run now
        r.ahead_ms = round((final_ns - r.request_ns) / 1e6, 1)  # started this long before the final
        await self.push(
            MetricsFrame(
                turn_id=r.turn, source="preempt", values={"kept": 1, "ahead_ms": r.ahead_ms}
            )
        )
        while r.held:  # the task may add more while a push waits
            f = r.held.pop(0)
            if isinstance(f, SpanFrame):
                f.attrs["preempt"] = "kept"
                f.attrs["ahead_ms"] = r.ahead_ms
                if f.name == "llm.first_chunk":  # handed to the TTS now, not when it was ready
                    f.attrs["ready_ms"] = round(f.duration_ms, 3)
                    f.end_ns = max(f.end_ns, now_ns())
            await self.push(f)
        r.held = None
        assert r.task is not None
        if r.task.done():
            self.remember(r)
