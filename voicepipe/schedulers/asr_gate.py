"""One Whisper decode at a time per process, finals before partials.

Every session's ASR stage decodes on one shared CTranslate2 model with one replica:
it runs one request at a time and queues the rest in arrival order. At 4 concurrent
sessions speaking together, each session's partials (one every
``asr.partial_interval_ms`` while it speaks) kept that queue full, and a session's
final waited behind the other sessions' partials: ``asr.final`` p50 went from
~10 ms to ~900 ms and voice to voice from ~0.6 s to 2.3 s (docs/BENCHMARKS.md,
"Many sessions on one box"). The queue wait is where the cliff came from, not the
decode itself.

So the stages take turns here, on the event loop, before they hand a decode to
a worker thread: a final (and the pause decodes that end a turn early or start a
preemptive reply) goes ahead of every waiting partial, and a partial runs only
when nothing urgent waits. A final then waits for at most the one decode in
flight. A partial that waited decodes the audio as it is when its turn comes
(``AsrStage`` picks its job again), so waiting costs it nothing in staleness.
Waiting holds no thread: the default executor's threads stay free for the other
stages.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque


class DecodeGate:
    """A lock with two priorities (FIFO within each) for one event loop."""

    def __init__(self) -> None:
        self.busy = False
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._other: deque[asyncio.Future[None]] = deque()

    async def acquire(self, urgent: bool) -> None:
        if not self.busy and not self._urgent and not self._other:
            self.busy = True
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (self._urgent if urgent else self._other).append(fut)
        try:
            await fut  # release() hands the gate over: busy stays True
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # handed over as we were cancelled: pass it on
            else:
                for q in (self._urgent, self._other):
                    if fut in q:
                        q.remove(fut)
            raise

    def release(self) -> None:
        for q in (self._urgent, self._other):
            while q:
                fut = q.popleft()
                if not fut.done():
                    fut.set_result(None)
                    return
        self.busy = False


_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, DecodeGate] = (
    weakref.WeakKeyDictionary()
)


def decode_gate() -> DecodeGate:
    """The running loop's gate (the server runs every session on one loop)."""
    loop = asyncio.get_running_loop()
    gate = _GATES.get(loop)
    if gate is None:
        gate = _GATES[loop] = DecodeGate()
    return gate
