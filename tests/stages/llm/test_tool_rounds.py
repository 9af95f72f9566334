"""A tool round without a model: spoken filler while a slow tool runs, template answers."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from voicepipe.core.tools import ToolCall
from voicepipe.stages.llm.tools import Round, run_round
from voicepipe.tools import BUILTINS, Toolbox, tool

GATE = threading.Event()  # the slow tool answers only once the filler has been said


@tool(speak="Found {n} books.")
def slow_search(query: str) -> dict[str, Any]:
    """Search the library (slowly)."""
    if not GATE.wait(30):
        raise TimeoutError("the test's gate never opened")
    return {"n": 3}


def _box() -> Toolbox:
    return Toolbox.build(list(BUILTINS), ["tests.stages.llm.test_tool_rounds:slow_search"])


class _Ctx:
    def alert_in(self, seconds: float, text: str, data: dict[str, Any]) -> str:
        return "t1"


async def test_a_slow_tool_gets_a_filler_then_its_answer() -> None:
    GATE.clear()
    said: list[str] = []

    async def filler() -> None:
        said.append("One moment.")
        GATE.set()  # only now may the tool answer: the filler came while it ran

    rnd = Round(started_ns=0, calls=[ToolCall("slow_search", {"query": "tea"})])
    await run_round(_box(), rnd, _Ctx(), 30.0, filler, 0.01)  # type: ignore[arg-type]
    assert said == ["One moment."] and rnd.filler
    assert rnd.results == [{"ok": True, "content": '{"n": 3}'}]
    assert rnd.spoken_answer(_box()) == "Found 3 books."
    assert rnd.span_attrs()["filler"] is True


async def test_a_quick_tool_gets_no_filler_and_several_calls_one_answer() -> None:
    said: list[str] = []

    async def filler() -> None:
        said.append("One moment.")

    calls = [
        ToolCall("calculate", {"expression": "12 * 15"}),
        ToolCall("set_timer", {"minutes": 10}),
    ]
    rnd = Round(started_ns=0, calls=calls)
    await run_round(_box(), rnd, _Ctx(), 30.0, filler, 60.0)  # type: ignore[arg-type]
    assert said == [] and not rnd.filler
    assert rnd.spoken_answer(_box()) == "12 times 15 is 180. Your 10 minute timer is set."


async def test_no_template_answer_when_a_call_failed_or_was_malformed() -> None:
    rnd = Round(started_ns=0, calls=[ToolCall("calculate", {"expression": "import os"})])
    await run_round(_box(), rnd, _Ctx(), 30.0)  # type: ignore[arg-type]
    assert not rnd.results[0]["ok"] and rnd.spoken_answer(_box()) is None
    rnd = Round(started_ns=0, calls=[ToolCall("calculate", {"expression": "1 + 1"})])
    rnd.errors = ["not JSON"]
    await run_round(_box(), rnd, _Ctx(), 30.0)  # type: ignore[arg-type]
    assert rnd.spoken_answer(_box()) is None  # the model hears of its bad call


async def test_a_call_to_no_such_tool_gets_the_configured_reply() -> None:
    from voicepipe import config

    sorry = config.load(None).tools.unknown_reply
    assert sorry  # on by default
    rnd = Round(started_ns=0, calls=[ToolCall("send_email", {"to": "landlord"})])
    await run_round(_box(), rnd, _Ctx(), 30.0)  # type: ignore[arg-type]
    assert not rnd.results[0]["ok"] and "no tool named" in rnd.results[0]["content"]
    assert rnd.spoken_answer(_box(), sorry) == sorry
    assert rnd.spoken_answer(_box(), sorry, speak=False) == sorry  # not a tool's template
    assert rnd.spoken_answer(_box(), "") is None  # off: the model reads the error
    # one real call beside it: the model answers (it has a result to say)
    calls = [ToolCall("send_email", {}), ToolCall("calculate", {"expression": "1 + 1"})]
    rnd = Round(started_ns=0, calls=calls)
    await run_round(_box(), rnd, _Ctx(), 30.0)  # type: ignore[arg-type]
    assert rnd.spoken_answer(_box(), sorry) is None
    # the built-ins' templates are off, the unknown reply is not
    rnd = Round(started_ns=0, calls=[ToolCall("calculate", {"expression": "1 + 1"})])
    await run_round(_box(), rnd, _Ctx(), 30.0)  # type: ignore[arg-type]
    assert rnd.spoken_answer(_box(), sorry, speak=False) is None


async def test_an_interrupted_round_stops_waiting() -> None:
    GATE.clear()
    rnd = Round(started_ns=0, calls=[ToolCall("slow_search", {"query": "tea"})])
    task = asyncio.ensure_future(run_round(_box(), rnd, _Ctx(), 30.0))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert task.cancelled() and rnd.results == []
    GATE.set()  # (lets the worker thread end)
