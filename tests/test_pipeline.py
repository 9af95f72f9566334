"""Pipeline: wiring, order, and a raising stage ends only its session with an ErrorFrame."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref

import pytest

from voicepipe.frames import ErrorFrame, Frame, InputEnd, TextDelta
from voicepipe.pipeline import Pipeline
from voicepipe.stage import Stage


class Upper(Stage):
    name = "upper"

    async def process(self, frame: Frame) -> None:
        if isinstance(frame, TextDelta):
            frame = TextDelta(turn_id=frame.turn_id, text=frame.text.upper())
        await self.push(frame)


class Boom(Stage):
    name = "boom"

    async def process(self, frame: Frame) -> None:
        if isinstance(frame, TextDelta) and frame.text == "BOOM":
            raise RuntimeError("stage exploded")
        await self.push(frame)


async def test_frames_flow_in_order_and_stop_is_clean() -> None:
    out: list[Frame] = []
    drained = asyncio.Event()

    async def sink(f: Frame) -> None:
        out.append(f)
        if isinstance(f, InputEnd):
            drained.set()

    before = len(asyncio.all_tasks())
    p = Pipeline([Upper(), Upper()], sink)
    await p.start()
    for w in "abc":
        await p.put(TextDelta(text=w))
    await p.put(InputEnd())  # in order, unlike End which jumps the queue
    await asyncio.wait_for(drained.wait(), 2)
    await p.stop()
    assert [f.text for f in out if isinstance(f, TextDelta)] == ["A", "B", "C"]
    assert [type(f).__name__ for f in out][-2:] == ["InputEnd", "End"]
    assert len(asyncio.all_tasks()) == before


async def test_raising_stage_ends_session_with_error_frame() -> None:
    out: list[Frame] = []

    async def sink(f: Frame) -> None:
        out.append(f)

    before = len(asyncio.all_tasks())
    p = Pipeline([Upper(), Boom(), Upper()], sink)
    await p.start()
    await p.put(TextDelta(text="ok"))
    await p.put(TextDelta(text="boom"))
    await asyncio.wait_for(p.done.wait(), 2)
    errors = [f for f in out if isinstance(f, ErrorFrame)]
    assert len(errors) == 1 and errors[0].code == "stage_error"
    assert "stage exploded" in errors[0].message
    await p.put(TextDelta(text="after"))  # ignored, never raises
    await p.stop()
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) == before


async def test_interrupt_propagates_through_every_stage() -> None:
    out: list[Frame] = []

    async def sink(f: Frame) -> None:
        out.append(f)

    stages = [Upper(), Upper(), Upper()]
    p = Pipeline(stages, sink)
    await p.start()
    await p.interrupt(5)
    await p.put(TextDelta(turn_id=4, text="stale"))  # older than the interrupt: dropped
    await p.put(TextDelta(turn_id=5, text="fresh"))
    await p.put(InputEnd(turn_id=5))
    for _ in range(100):
        if any(isinstance(f, InputEnd) for f in out):
            break
        await asyncio.sleep(0.01)
    await p.stop()
    assert [s.current_turn for s in stages] == [5, 5, 5]
    assert [f.text for f in out if isinstance(f, TextDelta)] == ["FRESH"]
    assert sum(type(f).__name__ == "Interrupt" for f in out) == 1


async def test_a_stopped_pipeline_is_freed_by_reference_counting_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A session holds its pipeline and is its sink: once stopped, nothing of it may wait
    for the cyclic GC (a finished assistant session held ~95 MB of KV cache that way)."""

    class Owner:  # what the server's Session is to its pipeline
        def __init__(self) -> None:
            self.out: list[Frame] = []
            self.pipeline = Pipeline([Upper(), Boom(), Upper()], self.sink)

        async def sink(self, f: Frame) -> None:
            self.out.append(f)

    # pytest keeps log records; the failed stage's would hold its traceback (so the stage).
    caplog.set_level(logging.CRITICAL, logger="voicepipe.pipeline")
    gc.collect()
    gc.disable()  # from here on only reference counting frees anything
    try:
        for text in ("ok", "boom"):  # a clean end, and one through a failing stage
            owner = Owner()
            p = owner.pipeline
            await p.start()
            await p.put(TextDelta(text=text))
            await p.put(InputEnd())
            for _ in range(200):
                if any(isinstance(f, (InputEnd, ErrorFrame)) for f in owner.out):
                    break
                await asyncio.sleep(0.01)
            await p.stop()
            refs = [weakref.ref(x) for x in (owner, p, *p.stages)]
            del owner, p
            assert [r() for r in refs] == [None] * len(refs), text
    finally:
        gc.enable()
