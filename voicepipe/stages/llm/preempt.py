"""The LLM stage's replies and preemptive generation (core/turns/preempt.py decides).

``_Reply`` is one reply being generated; ``Preempting`` is the part of
``LlmStage`` that starts a tentative reply on a ``TranscriptStable``, holds its
output, and releases (``_commit``) or drops (``_cancel``) it when the final
transcript comes. Not a stage: a base class of ``voicepipe/stages/llm/stage.py``'s.

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
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from voicepipe.clock import now_ns
from voicepipe.core.text.chunker import Chunker
from voicepipe.core.tools import Speech
from voicepipe.core.turns.preempt import Decision
from voicepipe.frames import Frame, MetricsFrame, SpanFrame, TextChunk, TextDelta, TranscriptStable
from voicepipe.stage import Stage

log = logging.getLogger(__name__)


@dataclass
class _Reply:
    """One reply being generated; while ``held`` is a list its output waits there."""

    turn: int
    text: str  # the user's words it answers
    request_ns: int
    preempt: str = "off"  # span attr: off | tentative → kept | cancelled
    held: list[Frame] | None = None
    spoken: list[str] = field(default_factory=list)  # chunks handed to the TTS (or held)
    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    remembered: bool = False
    ahead_ms: float = 0.0  # kept: how long before the final transcript it started
    first_tok_ns: int = 0
    tool_msgs: list[dict[str, Any]] = field(default_factory=list)  # calls and results
    ends_in_call: bool = False  # stopped at calls of tools the client runs
    committed: asyncio.Event = field(default_factory=asyncio.Event)  # tentative → kept

    @property
    def tentative(self) -> bool:
        return self.preempt == "tentative"


class Preempting(Stage):
    """Tentative replies of ``LlmStage`` (above), and emitting any reply's frames: held
    while the reply is tentative, pushed otherwise."""

    _tentative: _Reply | None

    def _generate(self, r: _Reply) -> Coroutine[Any, Any, None]:
        raise NotImplementedError

    def _remember(self, r: _Reply) -> None:
        raise NotImplementedError

    async def _apply(self, d: Decision, turn: int, stable: TranscriptStable | None = None) -> None:
        if d.cancel is not None and self._tentative is not None:
            r, self._tentative = self._tentative, None
            await self._cancel(r, "preempt")
        if d.start is not None and stable is not None:
            r = _Reply(turn, d.start, stable.t_ns, preempt="tentative", held=[])
            r.task = asyncio.create_task(self._generate(r), name=f"llm:tentative:{turn}")
            self._tentative = r

    async def _cancel(self, r: _Reply, reason: str) -> None:
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

    async def _commit(self, r: _Reply, final_ns: int) -> None:
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
            self._remember(r)

    async def _emit(self, r: _Reply, frame: Frame) -> None:
        if r.cancelled:
            return
        if r.held is not None:
            r.held.append(frame)
        else:
            await self.push(frame)

    async def _span(self, r: _Reply, name: str, start_ns: int, end_ns: int, **attrs) -> None:
        attrs["preempt"] = r.preempt
        if r.preempt == "kept":
            attrs["ahead_ms"] = r.ahead_ms
        await self._emit(
            r, SpanFrame(turn_id=r.turn, name=name, start_ns=start_ns, end_ns=end_ns, attrs=attrs)
        )

    async def _say(
        self, r: _Reply, chunker: Chunker, events: list[Any], said: list[str], calls: list[Any]
    ) -> None:
        """Speech events go to the client and the chunker (spoken); calls are collected."""
        for ev in events:
            if not isinstance(ev, Speech):
                calls.append(ev)
                continue
            said.append(ev.text)
            await self._emit(r, TextDelta(turn_id=r.turn, text=ev.text))
            for chunk in chunker.push(ev.text):
                if not r.spoken:
                    await self._span(
                        r, "llm.first_chunk", r.first_tok_ns, now_ns(), chars=len(chunk)
                    )
                r.spoken.append(chunk)
                await self._emit(r, TextChunk(turn_id=r.turn, text=chunk))
