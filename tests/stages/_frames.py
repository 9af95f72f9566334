"""Helpers for driving a stage's pipeline in tests: collect its frames, wait for one."""

from __future__ import annotations

import asyncio

from voicepipe.frames import Frame


def sink(out: list[Frame]):
    """A pipeline sink appending every frame to ``out``."""

    async def put(f: Frame) -> None:
        out.append(f)

    return put


async def wait_for(out: list[Frame], kind: type, timeout_s: float = 120.0) -> None:
    """Until a frame of ``kind`` is in ``out`` (an error after ``timeout_s``: a hang, not
    a speed check)."""
    for _ in range(int(timeout_s / 0.02)):
        if any(isinstance(f, kind) for f in out):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {kind.__name__} within {timeout_s} s")
