"""A tool round without a model: built-in calls the turn's words do not ask for are not
run ([tools] grounded), other tools always are."""

import asyncio
import json

from voicepipe.core.tools import ToolCall
from voicepipe.stages.llm_tools import Alerts, Round, run_round
from voicepipe.tools import Toolbox, resolve, tool

RAN: list[str] = []


@tool(description="Switch the lights on.")
def lights_on() -> str:
    RAN.append("lights_on")
    return "done"


async def _round(words: str | None) -> Round:
    box = Toolbox.build(["calculate", "set_timer"], [])
    box.add(resolve(f"{__name__}:lights_on"))
    rnd = Round(started_ns=0)
    rnd.calls = [
        ToolCall("calculate", {"expression": "1945 - 1939"}),
        ToolCall("lights_on", {}),
        ToolCall("set_timer", {"minutes": 10}),
    ]

    async def deliver(frame: object) -> None:
        pass

    alerts = Alerts(asyncio.get_running_loop(), deliver, lambda: 1)
    await run_round(box, rnd, alerts, 5.0, words)
    alerts.cancel_all()
    return rnd


async def test_ungrounded_builtin_calls_are_told_why_and_others_run() -> None:
    RAN.clear()
    rnd = await _round("Who won the last World Cup? And turn on the lights.")
    calc, lights, timer = rnd.results
    assert not calc["ok"] and json.loads(calc["content"])["error"].startswith("not run: ")
    assert lights["ok"] and RAN == ["lights_on"]  # a user's tool is theirs to judge
    assert not timer["ok"] and "timer" in json.loads(timer["content"])["error"]


async def test_without_the_turns_words_every_call_runs() -> None:
    RAN.clear()
    rnd = await _round(None)
    assert [r["ok"] for r in rnd.results] == [True, True, True]
    assert json.loads(rnd.results[0]["content"]) == {"result": "6"}
