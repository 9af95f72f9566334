"""The process's ASR decode gate (schedulers/asr_gate.py): finals go before waiting partials."""

from __future__ import annotations

import asyncio

from voicepipe.schedulers.asr_gate import DecodeGate


async def test_a_final_overtakes_waiting_partials_and_waits_for_one_decode_only() -> None:
    gate = DecodeGate()
    order: list[str] = []

    async def decode(name: str, urgent: bool) -> None:
        await gate.acquire(urgent)
        order.append(name)
        await asyncio.sleep(0)  # the decode (other tasks run meanwhile)
        gate.release()

    await gate.acquire(urgent=False)  # a partial in flight
    tasks = [asyncio.create_task(decode(f"partial{i}", False)) for i in range(3)]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(decode("final", True)))
    await asyncio.sleep(0)
    gate.release()
    await asyncio.gather(*tasks)
    assert order == ["final", "partial0", "partial1", "partial2"]
    assert not gate.busy


async def test_a_cancelled_waiter_leaves_the_queue_and_passes_the_gate_on() -> None:
    gate = DecodeGate()
    await gate.acquire(urgent=False)
    waiting = asyncio.create_task(gate.acquire(urgent=True))
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    gate.release()
    assert not gate.busy
    await asyncio.wait_for(gate.acquire(urgent=False), 1)  # free again
