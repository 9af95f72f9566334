"""A session's work in a batch worker thread, and how its results reach the session.

The LLM and TTS batchers (schedulers/llm_batch.py, schedulers/tts_batch.py) each run one
worker thread for every session of the process; a session hands it a ``Job`` and
awaits the job's outputs on its own event loop. The worker only appends and wakes
(``call_soon_threadsafe``); a session that is interrupted cancels its job, which
the worker drops before its next step.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from typing import Any

DONE = object()  # a job's end
_IDS = itertools.count(1)


class Job:
    """One session's work in a batcher: a prompt to feed, a reply to decode or to speak."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.id = next(_IDS)
        self._loop = loop
        self._out: deque[Any] = deque()  # step outputs, then DONE or an exception
        self._ready = asyncio.Event()
        self.cancelled = False
        self.finished = False

    # worker side
    def deliver(self, item: Any) -> None:
        self._out.append(item)
        try:
            self._loop.call_soon_threadsafe(self._ready.set)
        except RuntimeError:  # the session's loop is gone: nobody waits
            self.cancelled = True

    # asyncio side
    async def next(self) -> Any:
        """The next output (a step's tokens, a prefill chunk's size, audio), or ``DONE``."""
        while not self._out:
            self._ready.clear()
            if self._out:
                break
            await self._ready.wait()
        item = self._out.popleft()
        if isinstance(item, BaseException):
            raise item
        return item

    def cancel(self) -> None:
        self.cancelled = True
