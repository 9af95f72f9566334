"""Wiring and lifecycle of a chain of stages for one session.

    source ──put──► stage[0] ──► stage[1] ──► … ──► stage[n-1] ──► sink

``push_upstream`` of stage i feeds stage i-1 (and stage 0's goes to
``upstream_sink``). A stage that raises ends its session with an
``ErrorFrame`` sent to the sink; it never propagates to the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from voicepipe.frames import End, ErrorFrame, Frame, Interrupt
from voicepipe.stage import Emit, Stage, drop

log = logging.getLogger(__name__)


class Pipeline:
    def __init__(self, stages: Sequence[Stage], sink: Emit, upstream_sink: Emit = drop) -> None:
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        self.stages = list(stages)
        self.sink = sink
        self._tasks: list[asyncio.Task[None]] = []
        self.error: ErrorFrame | None = None
        self.done = asyncio.Event()
        for i, stage in enumerate(self.stages):
            stage.push = self.stages[i + 1].put if i + 1 < len(self.stages) else sink
            stage.push_upstream = self.stages[i - 1].put if i > 0 else upstream_sink

    async def start(self) -> None:
        for stage in self.stages:
            task = asyncio.create_task(stage.run(), name=f"stage:{stage.name}")
            task.add_done_callback(self._on_stage_done)
            self._tasks.append(task)

    def _on_stage_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and self.error is None:
            log.exception("stage %s failed", task.get_name(), exc_info=exc)
            self.error = ErrorFrame(code="stage_error", message=f"{task.get_name()}: {exc!r}")
            asyncio.get_running_loop().create_task(self._fail())
        if all(t.done() for t in self._tasks):
            self.done.set()

    async def _fail(self) -> None:
        assert self.error is not None
        with contextlib.suppress(Exception):
            await self.sink(self.error)
        await self.cancel()

    async def put(self, frame: Frame) -> None:
        if self.error is not None or self.done.is_set():
            return
        await self.stages[0].put(frame)

    async def interrupt(self, turn_id: int, reason: str = "barge-in") -> None:
        await self.put(Interrupt(turn_id=turn_id, reason=reason))

    async def stop(self, timeout: float = 5.0) -> None:
        """Graceful: End flows through every stage, then tasks are reaped."""
        if not self.done.is_set() and self.error is None:
            await self.stages[0].put(End())
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.done.wait(), timeout)
        await self.cancel()

    async def cancel(self) -> None:
        current = asyncio.current_task()
        pending = [t for t in self._tasks if not t.done() and t is not current]
        for t in pending:
            t.cancel()
        if pending:
            # wait(), not ``await t``: re-raised here, each task's CancelledError would carry
            # this frame (and so the pipeline) in its traceback, and outlive the session.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait(pending)
        self.done.set()
        if all(t.done() for t in self._tasks):
            self._unlink()

    def _unlink(self) -> None:
        """Cut the links that make a session's objects one reference cycle.

        Neighbouring stages point at each other (``push`` → next ``put``, ``push_upstream``
        → previous ``put``) and the last one at the sink, whose owner holds this pipeline.
        Left as they are, a finished session (its LLM's KV cache, ~95 MB, among the rest)
        waits for a full cyclic collection, which a process holding as many long-lived
        objects as the models' runs only rarely: memory grew by a session's worth with
        every session (docs/BENCHMARKS.md, "Memory per session"). Unlinked, reference
        counting frees it all the moment its owner lets go.
        """
        for stage in self.stages:
            stage.push = stage.push_upstream = drop
        self.sink = drop
