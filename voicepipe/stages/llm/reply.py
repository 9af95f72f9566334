"""One reply of the LLM stage, and where its frames go.

A ``Reply`` is handed to the backend that generates it (stages/llm/local.py,
stages/llm/remote.py): the backend emits the reply's text, chunks and spans through
it, and records what the stage's closing metrics need (``n_tokens``, the first and
last token's time, its own ``metrics`` and ``llm.tpot`` span). While the reply is
tentative (preemptive generation, stages/llm/preempt.py) ``held`` is a list and the
frames wait there; once it is cancelled nothing more goes anywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from voicepipe.clock import now_ns
from voicepipe.core.text.chunker import Chunker
from voicepipe.core.tools import Speech
from voicepipe.frames import Frame, SpanFrame, TextChunk, TextDelta

Push = Callable[[Frame], Awaitable[None]]


@dataclass
class Reply:
    """One reply being generated; while ``held`` is a list its output waits there."""

    turn: int
    text: str  # the user's words it answers
    request_ns: int
    push: Push  # where its frames go (the stage's push)
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
    # Filled by the backend once it generates (also when cancelled then) for the stage's
    # closing metrics; None: it never got that far (nothing to remember or measure).
    metrics: dict[str, Any] | None = None  # e.g. the speculation's
    tpot: tuple[int, int, dict[str, Any]] | None = None  # llm.tpot: start, end, attrs

    @property
    def tentative(self) -> bool:
        return self.preempt == "tentative"

    async def emit(self, frame: Frame) -> None:
        if self.cancelled:
            return
        if self.held is not None:
            self.held.append(frame)
        else:
            await self.push(frame)

    async def span(self, name: str, start_ns: int, end_ns: int, **attrs: Any) -> None:
        attrs["preempt"] = self.preempt
        if self.preempt == "kept":
            attrs["ahead_ms"] = self.ahead_ms
        await self.emit(
            SpanFrame(turn_id=self.turn, name=name, start_ns=start_ns, end_ns=end_ns, attrs=attrs)
        )

    async def say(self, chunker: Chunker, text: str) -> None:
        """Text for the client (a delta) and for the TTS (the chunker's clauses)."""
        await self.emit(TextDelta(turn_id=self.turn, text=text))
        for chunk in chunker.push(text):
            if not self.spoken:
                await self.span("llm.first_chunk", self.first_tok_ns, now_ns(), chars=len(chunk))
            self.spoken.append(chunk)
            await self.emit(TextChunk(turn_id=self.turn, text=chunk))

    async def say_events(
        self, chunker: Chunker, events: list[Any], said: list[str], calls: list[Any]
    ) -> None:
        """Speech events go to the client and the chunker (spoken); calls are collected."""
        for ev in events:
            if not isinstance(ev, Speech):
                calls.append(ev)
                continue
            said.append(ev.text)
            await self.say(chunker, ev.text)

    async def end(self, chunker: Chunker, rest_too: bool = True) -> None:
        """The chunker's rest (unless not ``rest_too``: a reply cut short says only the
        chunks the TTS has), and the last chunk that ends the reply for the TTS."""
        rest = chunker.flush() if rest_too else ""
        if rest:
            if not self.spoken:
                await self.span("llm.first_chunk", self.first_tok_ns, now_ns(), chars=len(rest))
            self.spoken.append(rest)
        await self.emit(TextChunk(turn_id=self.turn, text=rest or "", last=True))
