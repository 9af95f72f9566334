"""Stage runtime: system frames first, bounded queues, Interrupt cancels in-flight work."""

from __future__ import annotations

import asyncio

from voicepipe.frames import End, Frame, InputEnd, Interrupt, MetricsFrame, TextDelta
from voicepipe.stage import Inbox, Stage


async def test_system_frames_jump_the_queue() -> None:
    box = Inbox(maxsize=10)
    for i in range(3):
        await box.put(TextDelta(text=str(i)))
    await box.put(Interrupt(turn_id=1))
    await box.put(MetricsFrame(source="x", values={}))
    kinds = [type(box.get_nowait()).__name__ for _ in range(5)]
    assert kinds == ["Interrupt", "MetricsFrame", "TextDelta", "TextDelta", "TextDelta"]


async def test_bounded_queue_applies_backpressure() -> None:
    box = Inbox(maxsize=2)
    await box.put(TextDelta(text="a"))
    await box.put(TextDelta(text="b"))
    third = asyncio.create_task(box.put(TextDelta(text="c")))
    await asyncio.sleep(0.01)
    assert not third.done() and len(box) == 2  # the producer waits, memory does not grow
    await box.put(End())  # system frames are never blocked
    assert box.get_nowait().__class__ is End
    assert box.get_nowait().text == "a"
    await asyncio.wait_for(third, 1)
    assert [box.get_nowait().text for _ in range(2)] == ["b", "c"]


class Slow(Stage):
    name = "slow"

    def __init__(self) -> None:
        super().__init__(queue_size=4)
        self.started = asyncio.Event()
        self.cancelled: list[int] = []
        self.finished: list[int] = []

    async def process(self, frame: Frame) -> None:
        self.started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled.append(frame.turn_id)
            raise
        self.finished.append(frame.turn_id)


async def test_interrupt_cancels_in_flight_work_of_older_turns() -> None:
    out: list[Frame] = []

    async def sink(f: Frame) -> None:
        out.append(f)

    stage = Slow()
    stage.push = sink
    task = asyncio.create_task(stage.run())
    await stage.put(TextDelta(turn_id=1, text="old"))
    await stage.put(TextDelta(turn_id=1, text="old queued"))
    await asyncio.wait_for(stage.started.wait(), 1)
    await stage.put(Interrupt(turn_id=2))
    await stage.put(End())
    await asyncio.wait_for(task, 2)  # would take 30 s if the work were not cancelled
    assert stage.cancelled == [1] and stage.finished == []
    assert [type(f).__name__ for f in out] == ["Interrupt", "End"]


async def test_interrupt_spares_newer_turns() -> None:
    stage = Slow()
    task = asyncio.create_task(stage.run())
    await stage.put(TextDelta(turn_id=3, text="new"))
    await asyncio.wait_for(stage.started.wait(), 1)
    await stage.put(Interrupt(turn_id=2))
    await asyncio.sleep(0.05)
    assert stage.cancelled == []
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_input_end_survives_interrupts() -> None:
    """InputEnd is the session's in-order end marker: an interrupt of newer turns must not
    drop it (queued or arriving later), or the session never finishes after a barge-in."""
    out: list[Frame] = []

    async def sink(f: Frame) -> None:
        out.append(f)

    stage = Stage()
    stage.push = sink
    task = asyncio.create_task(stage.run())
    await stage.put(Interrupt(turn_id=5))
    await stage.put(TextDelta(turn_id=1, text="stale"))
    await stage.put(InputEnd(turn_id=0))
    for _ in range(100):
        if any(isinstance(f, InputEnd) for f in out):
            break
        await asyncio.sleep(0.01)
    await stage.put(End())  # End jumps the queue: send it only once InputEnd went through
    await asyncio.wait_for(task, 2)
    assert [type(f).__name__ for f in out] == ["Interrupt", "InputEnd", "End"]
