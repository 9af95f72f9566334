"""Stage base: one asyncio task per stage, system frames before data frames.

A stage receives frames with ``put`` and handles them in ``process``. Data
frames wait in a bounded queue (a slow stage slows its producer instead of
growing memory); system frames go to a separate unbounded lane that is always
drained first. While ``process`` works on a data frame, an arriving
``Interrupt`` for a newer turn cancels that work at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable

from voicepipe.frames import Cancel, End, Frame, InputEnd, Interrupt, SystemFrame

Emit = Callable[[Frame], Awaitable[None]]


async def drop(_: Frame) -> None:
    """Where an unwired stage's frames go: nowhere (a pipeline wires push to the next stage)."""
    return None


class Inbox:
    """A bounded data queue plus an unbounded priority lane for system frames."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: deque[Frame] = deque()
        self._system: deque[SystemFrame] = deque()
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()

    def __len__(self) -> int:
        return len(self._data) + len(self._system)

    async def put(self, frame: Frame) -> None:
        if isinstance(frame, SystemFrame):
            self._system.append(frame)
        else:
            while len(self._data) >= self.maxsize:
                self._writable.clear()
                await self._writable.wait()
            self._data.append(frame)
        self._readable.set()

    def has_system(self) -> bool:
        return bool(self._system)

    def get_nowait(self) -> Frame | None:
        if self._system:
            frame: Frame = self._system.popleft()
        elif self._data:
            frame = self._data.popleft()
            self._writable.set()
        else:
            return None
        if not self._system and not self._data:
            self._readable.clear()
        return frame

    async def get(self) -> Frame:
        while True:
            frame = self.get_nowait()
            if frame is not None:
                return frame
            # drop_data may have emptied the queue while _readable stayed set: without
            # this clear, wait() returns at once and get() spins, starving the loop.
            self._readable.clear()
            await self._readable.wait()

    async def wait_system(self) -> None:
        while not self._system:
            self._readable.clear()
            await self._readable.wait()

    def drop_data(self, keep: Callable[[Frame], bool]) -> int:
        """Drop queued data frames for which ``keep`` is false; returns how many."""
        before = len(self._data)
        self._data = deque(f for f in self._data if keep(f))
        self._writable.set()
        return before - len(self._data)


class TurnCounter:
    """One session's turn ids, shared by the stages that begin turns: the ASR (the user
    speaks) and the LLM (an alert it speaks unasked, e.g. a timer that ended), so that
    no two replies share a turn. Clients treat a turn's reply as over once it ended, so
    an alert spoken under an old turn id would be dropped as late."""

    def __init__(self) -> None:
        self.last = 0

    def next(self, at_least: int = 0) -> int:
        """A new turn id, above every one given out and above ``at_least``."""
        self.last = max(self.last, at_least) + 1
        return self.last


class Stage:
    """Base class. Subclasses override ``process`` (and optionally hooks below).

    ``push`` sends a frame downstream; ``push_upstream`` sends one towards the
    source (used for playback reports). Frames a stage does not handle should
    be pushed on unchanged so that later stages and the client see them.
    """

    name = "stage"
    # An intake stage takes the microphone's audio (echo cancelling, ASR): it is where
    # turns come from, so nothing it holds is an older turn's work, and an Interrupt or
    # Cancel passing through must neither drop its frames nor cancel its work.
    intake = False

    def __init__(self, *, queue_size: int = 64) -> None:
        self.inbox = Inbox(queue_size)
        self.push: Emit = drop
        self.push_upstream: Emit = drop
        self.current_turn = 0
        self._work: asyncio.Task[None] | None = None
        self._work_turn = -1
        self.started = asyncio.Event()  # start() returned: models loaded, settings final

    async def put(self, frame: Frame) -> None:
        await self.inbox.put(frame)

    # ------------------------------------------------------------- hooks

    async def start(self) -> None:
        """Load models / open resources; runs before the first frame."""

    async def stop(self) -> None:
        """Release resources; runs after ``End`` or cancellation."""

    async def process(self, frame: Frame) -> None:
        await self.push(frame)

    async def on_system(self, frame: SystemFrame) -> None:
        """Called for each system frame after the base class acted on it."""

    # ------------------------------------------------------------- engine

    def _stale(self, frame: Frame, turn: int) -> bool:
        if self.intake:
            return False
        # InputEnd belongs to the session, not to a turn: it must survive every interrupt,
        # or the server would never say "done" after a barge-in.
        return frame.turn_id < turn and not isinstance(frame, InputEnd)

    async def _handle_system(self, frame: SystemFrame) -> bool:
        """Returns False when the stage should stop."""
        if self.intake and isinstance(frame, Interrupt | Cancel):
            self.current_turn = max(self.current_turn, frame.turn_id)
        elif isinstance(frame, Interrupt):
            self.current_turn = max(self.current_turn, frame.turn_id)
            self.inbox.drop_data(lambda f: not self._stale(f, frame.turn_id))
            if self._work is not None and not self._work.done() and self._work_turn < frame.turn_id:
                self._work.cancel()
        elif isinstance(frame, Cancel):
            self.inbox.drop_data(lambda f: f.turn_id != frame.turn_id)
            work = self._work
            if work is not None and not work.done() and self._work_turn == frame.turn_id:
                work.cancel()
        await self.on_system(frame)
        await self.push(frame)
        return not isinstance(frame, End)

    async def _finish_work(self) -> None:
        """Wait for the in-flight data frame while still serving system frames."""
        work = self._work
        assert work is not None
        while not work.done():
            waiter = asyncio.ensure_future(self.inbox.wait_system())
            try:
                await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
            while self.inbox.has_system():
                frame = self.inbox.get_nowait()
                assert isinstance(frame, SystemFrame)
                if isinstance(frame, End):
                    # End waits for the current work to finish, then stops.
                    self.inbox._system.appendleft(frame)
                    await asyncio.wait({work})
                    break
                await self._handle_system(frame)
        self._work = None
        if work.cancelled():
            return
        exc = work.exception()
        del work  # the traceback keeps this frame: its locals must not lead back to ``exc``
        if exc is not None:
            try:
                raise exc
            finally:
                del exc  # (a cycle through this frame would keep the stage until a full GC)

    async def run(self) -> None:
        await self.start()
        self.started.set()
        try:
            while True:
                frame = await self.inbox.get()
                if isinstance(frame, SystemFrame):
                    if not await self._handle_system(frame):
                        return
                    continue
                if self._stale(frame, self.current_turn):
                    continue
                self._work_turn = frame.turn_id
                self._work = asyncio.ensure_future(self.process(frame))
                await self._finish_work()
        finally:
            if self._work is not None and not self._work.done():
                self._work.cancel()
            await self.stop()
