"""Tool registry and runtime: built-ins, user tools by "module:function", clear errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from voicepipe.core.tools import ToolCall
from voicepipe.tools import BUILTINS, Toolbox, ToolError, resolve, tool

# --- user tools, referenced below as "tests.test_tools:NAME" -------------------------


def plain_weather(city: str, days: int = 1) -> str:
    """Tell the weather forecast for a city.

    (This paragraph is not sent to the model.)"""
    return f"{city}: sunny for {days} day(s)"


@tool(
    description="Look up a word in the user's notes.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}},
                "required": ["word"]},
)  # fmt: skip
def notes(word: str) -> dict[str, Any]:
    return {"word": word, "notes": []}


@tool(name="explode")
def exploding() -> str:
    """Fail."""
    raise RuntimeError("boom")


@tool(speak="The light in the {room} is {state}.")
def lights(room: str, on: bool) -> dict[str, Any]:
    """Switch the lights of a room."""
    return {"state": "on" if on else "off"}


@tool(speak=lambda args, result: f"{args['city']} has {len(result)} stations.")
def stations(city: str) -> list[str]:
    """List a city's train stations."""
    return ["Central", "North"]


@tool(speak="{nothing_like_this}")
def misfit() -> str:
    """A template that does not fit its result."""
    return "x"


def undocumented(x: str) -> str:
    return x


def listy(xs: list) -> str:  # type: ignore[type-arg]
    """Takes a list."""
    return ""


NOT_CALLABLE = 3


class _Ctx:
    def __init__(self) -> None:
        self.alerts: list[tuple[float, str, dict]] = []

    def alert_in(self, seconds: float, text: str, data: dict) -> str:
        self.alerts.append((seconds, text, data))
        return f"t{len(self.alerts)}"


def test_user_tools_by_name_with_schema_from_signature_or_decorator() -> None:
    box = Toolbox.build([], ["tests.test_tools:plain_weather", "tests.test_tools:notes"])
    specs = {s["function"]["name"]: s["function"] for s in box.specs()}
    assert specs["plain_weather"] == {
        "name": "plain_weather",
        "description": "Tell the weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    }
    assert specs["notes"]["description"] == "Look up a word in the user's notes."
    ok, out = box.call(ToolCall("plain_weather", {"city": "Oslo", "days": 2}), _Ctx())
    assert ok and out == "Oslo: sunny for 2 day(s)"
    ok, out = box.call(ToolCall("notes", {"word": "tea"}), _Ctx())
    assert ok and json.loads(out) == {"word": "tea", "notes": []}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no_colon", "is not 'module:function'"),
        ("tests.no_such_module:f", "cannot import 'tests.no_such_module'"),
        ("tests.test_tools:nope", "has no 'nope'"),
        ("tests.test_tools:NOT_CALLABLE", "is not a function"),
        ("tests.test_tools:undocumented", "has no description"),
        ("tests.test_tools:listy", "must be str, int, float or bool"),
    ],
)
def test_bad_user_tool_names_say_what_is_wrong(ref: str, message: str) -> None:
    with pytest.raises(ToolError, match=message.replace("(", r"\(")):
        Toolbox.build([], [ref])


def test_bad_builtin_and_duplicate_names() -> None:
    with pytest.raises(ToolError, match="unknown tool 'alarm'"):
        Toolbox.build(["alarm"], [])
    with pytest.raises(ToolError, match="two tools are named 'calculate'"):
        Toolbox.build(["calculate", "calculate"], [])


def test_failures_become_messages_for_the_model() -> None:
    box = Toolbox.build(["calculate"], ["tests.test_tools:exploding"])
    assert resolve("tests.test_tools:exploding").name == "explode"
    cases = [
        (ToolCall("explode", {}), "RuntimeError: boom"),
        (ToolCall("nope", {}), "no tool named 'nope'"),
        (ToolCall("calculate", {}), "missing argument(s) expression"),
        (ToolCall("calculate", {"expression": "import os"}), "CalcError"),
    ]
    for call, error in cases:
        ok, out = box.call(call, _Ctx())
        assert not ok and error in json.loads(out)["error"]


def test_builtins() -> None:
    box = Toolbox.build(list(BUILTINS), [])
    ctx = _Ctx()
    ok, out = box.call(ToolCall("set_timer", {"minutes": 10, "label": "tea"}), ctx)
    assert ok and json.loads(out) == {"status": "started", "duration": "10 minutes",
                                      "label": "tea"}  # fmt: skip
    ((seconds, text, data),) = ctx.alerts
    assert seconds == 600 and "10 minute timer for tea" in text and data["label"] == "tea"
    for bad in ({"minutes": 0}, {"hours": 25}, {"minutes": "ten"}):
        ok, _ = box.call(ToolCall("set_timer", bad), ctx)
        assert not ok
    assert len(ctx.alerts) == 1
    ok, out = box.call(ToolCall("calculate", {"expression": "17 * 23"}), ctx)
    assert ok and json.loads(out)["result"] == "391"
    ok, out = box.call(ToolCall("get_current_time", {}), ctx)
    now = json.loads(out)
    assert ok and set(now) == {"time", "date", "weekday", "timezone"}


def test_builtins_speak_their_results() -> None:
    box = Toolbox.build(list(BUILTINS), [])
    ctx = _Ctx()

    def said(name: str, args: dict[str, Any]) -> str | None:
        call = ToolCall(name, args)
        ok, out = box.call(call, ctx)
        assert ok, out
        return box.spoken(call, out)

    assert said("set_timer", {"minutes": 10}) == "Your 10 minute timer is set."
    assert said("set_timer", {"hours": 1, "minutes": 30, "label": "the bread"}) == (
        "Your 1 hour 30 minute timer for the bread is set."
    )
    # A label that restates the duration is not said twice.
    assert said("set_timer", {"minutes": 10, "label": "Ten minutes"}) == (
        "Your 10 minute timer is set."
    )
    assert said("calculate", {"expression": "12 * 15"}) == "12 times 15 is 180."
    assert said("calculate", {"expression": "7 / 3"}) == "7 divided by 3 is about 2.333."
    assert said("calculate", {"expression": "(4 + 5) / 3"}) == "That's 3."
    now = said("get_current_time", {})
    assert now is not None and now.startswith("It's ") and now.endswith(".")


def test_user_tools_opt_in_to_a_spoken_result() -> None:
    refs = ["lights", "stations", "misfit", "plain_weather"]
    box = Toolbox.build([], [f"tests.test_tools:{r}" for r in refs])

    def said(name: str, args: dict[str, Any]) -> str | None:
        call = ToolCall(name, args)
        ok, out = box.call(call, _Ctx())
        assert ok, out
        return box.spoken(call, out)

    # A template gets the arguments and the result's keys; a function both, whole.
    assert said("lights", {"room": "kitchen", "on": True}) == "The light in the kitchen is on."
    assert said("stations", {"city": "Oslo"}) == "Oslo has 2 stations."
    # A template that does not fit, or no speak at all: the model says the result.
    assert said("misfit", {}) is None
    assert said("plain_weather", {"city": "Oslo"}) is None
    with pytest.raises(ToolError, match="speak must be a template string or a function"):
        tool(speak=3)(plain_weather)  # type: ignore[arg-type]
