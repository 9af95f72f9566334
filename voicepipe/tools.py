"""Tools the LLM may call: the built-in set, user Python tools, running a call.

Built-ins (``[tools] builtin``):

- ``set_timer`` (hours / minutes / seconds, an optional label): when it fires the
  session gets an alert (the ``alert`` message on /ws, docs/PROTOCOL.md) and hears
  it spoken;
- ``get_current_time``: the local time, date and weekday;
- ``calculate``: arithmetic, parsed by ``voicepipe.core.calc`` (never ``eval``).

User tools (``[tools] user``, docs/TOOLS.md): a list of ``"module:function"``
names. A function decorated with ``@voicepipe.tools.tool(...)`` brings its own
description and JSON schema; a plain function gets them from its docstring and
type hints (str, int, float, bool; a parameter without a default is required).
A name that does not resolve raises ``ToolError`` naming it and why.

A tool is a plain function of its arguments (keyword) returning something JSON
can encode; it runs in a worker thread, bounded by ``[tools] timeout_s``. One that
takes a ``ctx`` parameter also gets a ``ToolContext`` (``alert_in``: the timer).

Spoken results: a tool may say its own result (``speak``) instead of handing it to
the model for a second round: a template string (``str.format`` with the arguments
and, for a dict result, its keys; ``{result}`` is the whole result) or a callable
``speak(arguments, result) -> str``. The built-ins all do ("Your 10 minute timer is
set.", "It's 3:41 in the afternoon on Friday, November 27.", "12 times 15 is
180."): a voice turn then costs one model round, the call, not two. A user tool
without ``speak`` keeps the model round.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from voicepipe.core import calc
from voicepipe.core.tools import (
    ToolCall,
    ToolSpec,
    check_arguments,
    spoken_clock,
    spoken_duration,
    timer_seconds,
)

_TOOL_ATTR = "__voicepipe_tool__"
MAX_TIMER_S = 24 * 3600.0
_PY_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


class ToolError(ValueError):
    """A tool that cannot be registered (bad name, bad schema); names the culprit."""


class ToolContext(Protocol):
    """What a session offers a tool beyond its arguments."""

    def alert_in(self, seconds: float, text: str, data: dict[str, Any]) -> str:
        """Speak ``text`` (and send an ``alert`` event) after ``seconds``; returns its id."""
        ...


# A spoken result: a format string, or a function of (arguments, result).
Speak = str | Callable[[dict[str, Any], Any], str]


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    fn: Callable[..., Any]
    wants_ctx: bool = False
    speak: Speak | None = None  # says the result itself (no model round): see above

    @property
    def name(self) -> str:
        return self.spec.name


def tool(
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    name: str | None = None,
    speak: Speak | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: mark a function as a tool, with its description and JSON schema (both
    derived from the docstring and type hints when not given). The function is
    returned unchanged; list it in ``[tools] user`` as ``"module:function"``.
    ``speak``: the result said from this template (or function) without a model round."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, _TOOL_ATTR, _make(fn, description, parameters, name, speak))
        return fn

    return mark


def _make(
    fn: Callable[..., Any],
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    name: str | None = None,
    speak: Speak | None = None,
) -> Tool:
    label = name or getattr(fn, "__name__", "")
    if speak is not None and not (isinstance(speak, str) or callable(speak)):
        raise ToolError(f"tool {label!r}: speak must be a template string or a function")
    if not label or not label.replace("_", "a").isalnum():
        raise ToolError(f"tool name {label!r}: use letters, digits and underscores")
    sig = inspect.signature(fn)
    wants_ctx = "ctx" in sig.parameters
    desc = description or inspect.getdoc(fn) or ""
    if not desc:
        raise ToolError(f"tool {label!r} has no description: give it a docstring")
    desc = desc.split("\n\n", 1)[0].replace("\n", " ")
    if parameters is None:
        parameters = _schema(fn, label)
    if parameters.get("type") != "object":
        raise ToolError(f"tool {label!r}: parameters must be a JSON schema of type object")
    return Tool(ToolSpec(label, desc, dict(parameters)), fn, wants_ctx, speak)


def _schema(fn: Callable[..., Any], label: str) -> dict[str, Any]:
    """A JSON schema from the signature: str/int/float/bool parameters, those without a
    default required."""
    hints = typing.get_type_hints(fn)
    props: dict[str, Any] = {}
    required: list[str] = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == "ctx":
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolError(f"tool {label!r}: *args/**kwargs cannot be described to a model")
        typ = _PY_TYPES.get(hints.get(p.name, str))
        if typ is None:
            raise ToolError(
                f"tool {label!r}: parameter {p.name} must be str, int, float or bool "
                "(or give @tool(parameters=...) a JSON schema)"
            )
        props[p.name] = {"type": typ}
        if p.default is p.empty:
            required.append(p.name)
    return {"type": "object", "properties": props, "required": required}


# ---------------------------------------------------------------- the built-ins


def set_timer(
    ctx: ToolContext, hours: float = 0, minutes: float = 0, seconds: float = 0, label: str = ""
) -> dict[str, Any]:
    """Start a countdown timer; the user is alerted out loud when it ends."""
    total = timer_seconds({"hours": hours, "minutes": minutes, "seconds": seconds})
    if total <= 0:
        raise ValueError("set_timer: give a duration above zero")
    if total > MAX_TIMER_S:
        raise ValueError("set_timer: at most 24 hours")
    what = f"{spoken_duration(total)} timer" + (f" for {label}" if label else "")
    text = f"Your {what} is done." if not label else f"Time's up: your {what} is done."
    data = {"tool": "set_timer", "seconds": total, "label": label}
    ctx.alert_in(total, text, data)
    # What the model reads back to the user: no ids or raw seconds to recite.
    out = {"status": "started", "duration": spoken_duration(total, plural=True)}
    return {**out, "label": label} if label else out


def get_current_time() -> dict[str, str]:
    """Get the current local time and date."""
    now = _dt.datetime.now().astimezone()
    return {
        "time": now.strftime("%H:%M"),
        "date": now.strftime("%Y-%m-%d"),
        "weekday": now.strftime("%A"),
        "timezone": now.tzname() or "",
    }


def calculate(expression: str) -> dict[str, str]:
    """Evaluate an arithmetic expression."""
    # The value only: echoing the expression, the 1.5B read "17 * 23" aloud as "17 23".
    return {"result": calc.format_number(calc.evaluate(expression))}


# A label that only restates the duration: the 1.5B labels "ten minutes" timers so.
_DURATION_LABEL = re.compile(r"\d|\b(?:hours?|minutes?|seconds?|mins?|secs?|timer)\b", re.I)


def _say_timer(args: dict[str, Any], result: Any) -> str:
    label = str(args.get("label") or "").strip()
    if _DURATION_LABEL.search(label):
        label = ""  # not "Your 10 minute timer for Ten minutes is set."
    what = f"{spoken_duration(timer_seconds(args))} timer" + (f" for {label}" if label else "")
    return f"Your {what} is set."


def _say_time(args: dict[str, Any], result: Any) -> str:
    return spoken_clock(result["time"], result.get("weekday", ""), result.get("date", ""))


def _say_sum(args: dict[str, Any], result: Any) -> str:
    value = float(result["result"])
    said = calc.format_number(round(value, 3))
    about = "about " if float(said) != value else ""  # 7 / 3: "about 2.333", not ten digits
    expr = calc.spoken(str(args.get("expression", "")))
    return f"{expr} is {about}{said}." if expr else f"That's {about}{said}."


_NUM = {"type": "number"}
BUILTINS: dict[str, Tool] = {
    t.name: t
    for t in (
        _make(
            set_timer,
            "Start a countdown timer for a duration; the user is alerted out loud when it "
            "ends. Give the duration in hours, minutes and/or seconds.",
            {
                "type": "object",
                "properties": {
                    "hours": _NUM,
                    "minutes": _NUM,
                    "seconds": _NUM,
                    "label": {"type": "string", "description": "what the timer is for"},
                },
                "required": [],
            },
            speak=_say_timer,
        ),
        _make(
            get_current_time,
            parameters={"type": "object", "properties": {}, "required": []},
            speak=_say_time,
        ),
        _make(
            calculate,
            "Calculate the value of an arithmetic expression, e.g. '17 * 23' or '(4 + 5) / 3'.",
            {
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "description": "numbers with + - * / ** % and parentheses",
                    }
                },
                "required": ["expression"],
            },
            speak=_say_sum,
        ),
    )
}


# ---------------------------------------------------------------- a session's tools


def resolve(ref: str) -> Tool:
    """A user tool from ``"module:function"``; ToolError naming what went wrong."""
    mod_name, sep, attr = ref.partition(":")
    if not sep or not mod_name or not attr:
        raise ToolError(f"tools.user: {ref!r} is not 'module:function'")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ToolError(f"tools.user: {ref!r}: cannot import {mod_name!r} ({e})") from e
    fn = getattr(mod, attr, None)
    if fn is None:
        raise ToolError(f"tools.user: {ref!r}: module {mod_name!r} has no {attr!r}")
    if not callable(fn):
        raise ToolError(f"tools.user: {ref!r} is not a function")
    marked = getattr(fn, _TOOL_ATTR, None)
    return marked if isinstance(marked, Tool) else _make(fn)


@dataclass
class Toolbox:
    """The tools one session may call, by name."""

    tools: dict[str, Tool] = field(default_factory=dict)

    @classmethod
    def build(cls, builtin: Iterable[str], user: Iterable[str]) -> Toolbox:
        box = cls()
        for name in builtin:
            if name not in BUILTINS:
                raise ToolError(
                    f"tools.builtin: unknown tool {name!r} (known: {', '.join(BUILTINS)})"
                )
            box.add(BUILTINS[name])
        for ref in user:
            box.add(resolve(ref))
        return box

    def add(self, t: Tool) -> None:
        if t.name in self.tools:
            raise ToolError(f"two tools are named {t.name!r}")
        self.tools[t.name] = t

    def specs(self) -> list[dict[str, Any]]:
        """What the chat template renders (``tools=``), in registration order."""
        return [t.spec.for_template() for t in self.tools.values()]

    def call(self, call: ToolCall, ctx: ToolContext) -> tuple[bool, str]:
        """Run one call (blocking; the stage runs it in a thread): (ok, the tool message's
        content). Every failure becomes a message the model can read and say."""
        t = self.tools.get(call.name)
        if t is None:
            return False, json.dumps({"error": f"no tool named {call.name!r}"})
        bad = check_arguments(t.spec, call.arguments)
        if bad:
            return False, json.dumps({"error": bad})
        try:
            out = t.fn(**call.arguments, ctx=ctx) if t.wants_ctx else t.fn(**call.arguments)
        except Exception as e:  # a tool's failure is the model's to explain, not the session's
            return False, json.dumps({"error": f"{type(e).__name__}: {e}"})
        try:
            return True, out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
        except (TypeError, ValueError):
            return True, str(out)

    def spoken(self, call: ToolCall, content: str) -> str | None:
        """What the tool says of its (successful) result ``content``, or None: it has no
        ``speak``, or its template does not fit this result (then the model says it)."""
        t = self.tools.get(call.name)
        if t is None or t.speak is None:
            return None
        try:
            result: Any = json.loads(content)
        except ValueError:
            result = content  # a tool that returned a plain string
        try:
            if isinstance(t.speak, str):
                fields = result if isinstance(result, dict) else {}
                text = t.speak.format(**{**call.arguments, **fields, "result": result})
            else:
                text = t.speak(dict(call.arguments), result)
        except Exception:  # a template that does not fit: the model round still answers
            return None
        text = str(text).strip() if text is not None else ""
        return text or None
