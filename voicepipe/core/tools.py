"""Function calling, sans-I/O: tool specs, the tool-call stream splitter, argument checks.

A model whose chat template supports tools (Qwen2.5's, read from the GGUF) is
shown the tools' JSON schemas in its system block and answers a request for
one with

    <tool_call>
    {"name": "set_timer", "arguments": {"minutes": 10}}
    </tool_call>

``CallSplitter`` takes the reply's text as it streams and separates what may be
spoken from such calls: text outside the tags goes on (to the chunker and the
TTS), a call's JSON never does; a tag split across deltas is held back until it
is known not to be a tag. ``parse_call`` reads one call; ``check_arguments``
holds it against the tool's schema (required keys, types, no unknown keys) so a
bad call becomes an error message for the model, not an exception in a tool.

The runtime (running tools, timers, user tools) is ``voicepipe/tools.py``; the
LLM stage drives both (``voicepipe/stages/llm/stage.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from voicepipe.core import calc
from voicepipe.core.tool_xml import Types, parse_xml_call

OPEN, CLOSE = "<tool_call>", "</tool_call>"
# Tags a call may come in: the template's, and the tools block's own, which
# Qwen2.5-Coder-1.5B sometimes wraps its call in (or leaves empty) instead.
TAGS = {OPEN: CLOSE, "<tools>": "</tools>"}
# How a call begins (the template's tag and JSON): the LLM stage starts the model on it
# when the model opened a call and left it empty.
FORCED_CALL = OPEN + '\n{"name": "'
# A tool result's tags (the template wraps results in them): a model that writes one
# is echoing a result, never speaking to the user (after a bad call the 1.5B read its
# error back inside them). What they hold is dropped.
ECHO = {"<tool_response>": "</tool_response>"}
_OPENERS = (*TAGS, *ECHO)
_LONGEST_OPENER = max(map(len, _OPENERS))

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool: its name, what it does, its JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )

    def for_template(self) -> dict[str, Any]:
        """The OpenAI-style function entry chat templates render (``tool | tojson``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]

    def for_template(self) -> dict[str, Any]:
        """The assistant message's ``tool_calls`` entry the chat template renders back."""
        return {"type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class BadCall:
    """Text between the tags that is not a call (the error is told back to the model)."""

    raw: str
    error: str


@dataclass(frozen=True)
class Speech:
    """Reply text outside any tool call: may be spoken."""

    text: str


Event = Speech | ToolCall | BadCall


def parse_call(raw: str, types: Types | None = None) -> ToolCall | BadCall:
    """One call's JSON (the text between the tags): ``{"name": …, "arguments": {…}}``.
    ``arguments`` may also be a JSON string holding the object (OpenAI's wire form).
    With the tools' ``types``, a call written as XML is read too (core/tool_xml.py)."""
    if not raw.strip():
        return BadCall(raw, 'empty: write {"name": …, "arguments": {…}} in the tags')
    try:
        obj, _ = json.JSONDecoder().raw_decode(raw.strip())
    except json.JSONDecodeError as e:
        xml = parse_xml_call(raw, types) if types is not None else None
        if xml is not None:
            return ToolCall(*xml)
        return BadCall(raw, f"not JSON: {e.msg}")
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return BadCall(raw, 'expected {"name": …, "arguments": {…}}')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            return BadCall(raw, f"arguments are not JSON: {e.msg}")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return BadCall(raw, "arguments must be a JSON object")
    return ToolCall(obj["name"], args)


class CallSplitter:
    """Streamed reply text → ``Speech`` and ``ToolCall``/``BadCall`` events, in order.

    Two forms of call are recognised: the template's tagged form, and the same JSON
    object written bare where a reply (or the text after a call) begins, which small
    models write when the template's instruction shows it (Qwen2.5-Coder-1.5B copies
    its GGUF template's ``{{"name": …}}`` literally, doubled braces and all, without
    the tags). A bare object is held back until its braces balance, then read as a
    call if it is one (``"name"`` and ``"arguments"``) and spoken otherwise. Text in
    a tool result's tags (``ECHO``) is neither: it is dropped.
    """

    def __init__(self, types: Types | None = None) -> None:
        self._types = types  # the tools' argument types: XML calls are read too
        self._buf = ""
        self._close = ""  # inside a tagged call: the tag that ends it
        self._echo = False  # the tagged text is an echoed tool result: dropped
        self._at_start = True  # nothing but whitespace since the start or the last call
        self._eat_braces = False  # a bare call's surplus closing braces may follow
        self._bare_open = False  # a bare object begun, its braces not yet balanced
        self.calls = 0  # calls begun so far

    def push(self, text: str) -> list[Event]:
        self._buf += text
        out: list[Event] = []
        while self._step(out):
            pass
        return out

    def _step(self, out: list[Event]) -> bool:
        """Consume what can be decided of the buffer; True if it should be called again."""
        if self._eat_braces:
            rest = self._buf.lstrip("} \n")
            if not rest:
                return False
            self._buf, self._eat_braces = rest, False
        if self._close:
            end = self._buf.find(self._close)
            if end < 0:
                return False
            if not self._echo:
                out.append(parse_call(_one_brace(self._buf[:end]), self._types))
            self._buf = self._buf[end + len(self._close) :]
            self._close, self._echo, self._at_start = "", False, True
            return True
        if self._at_start and self._buf.lstrip().startswith("{"):
            return self._bare(out)
        found = [(i, tag) for tag in _OPENERS if (i := self._buf.find(tag)) >= 0]
        if found:
            start, tag = min(found)
            before = self._buf[:start]
            if before.strip() or (before and not self._at_start):
                out.append(Speech(before))
            self._buf = self._buf[start + len(tag) :]
            self._echo = tag in ECHO
            self._close = ECHO[tag] if self._echo else TAGS[tag]
            if not self._echo:
                self.calls += 1
            return True
        keep = _partial_tag(self._buf)  # "<tool_c" at the end may be a tag's start
        cut = len(self._buf) - keep
        speak = self._buf[:cut]
        if self._at_start and not speak.strip():
            return False  # leading whitespace waits: a bare call may follow it
        self._buf = self._buf[cut:]
        self._at_start = False
        if speak:
            out.append(Speech(speak))
        return False

    def _bare(self, out: list[Event]) -> bool:
        body = self._buf.lstrip()
        if not self._bare_open:
            self._bare_open = True
            self.calls += 1  # begun, as far as anyone can tell yet
        end = _balanced_end(body)
        if end is None:
            return False
        self._bare_open = False
        event = parse_call(_one_brace(body[:end]), self._types)
        self._buf = body[end:]
        if isinstance(event, ToolCall):
            out.append(event)
            self._eat_braces = True
            return True
        self.calls -= 1  # not a call after all: say it
        self._at_start = False
        out.append(Speech(body[:end]))
        return True

    def flush(self) -> list[Event]:
        """The reply ended: a call left open is read as far as it got (a model that stops
        right after the JSON, without the closing tag, still made its call)."""
        rest, self._buf = self._buf, ""
        if self._echo:  # an echo never closed: dropped to the end
            self._close, self._echo = "", False
            return []
        if self._close or self._bare_open:
            self._close, self._bare_open = "", False
            return [parse_call(_one_brace(rest), self._types)]
        if self._eat_braces:
            rest = rest.lstrip("} \n")
        return [Speech(rest)] if rest.strip() else []


def _one_brace(text: str) -> str:
    """``{{"name": …}}`` (the doubled braces of a template's literal) → ``{"name": …}``.
    Only braces outside strings count: an argument may hold "}"."""
    t = text.strip()
    while t.startswith("{{"):
        t = t[1:]
    surplus = -_depth(t)
    while surplus > 0 and t.endswith("}}"):
        t, surplus = t[:-1], surplus - 1
    return t


def _braces(text: str) -> Iterator[tuple[int, int]]:
    """(index, +1 or -1) for each brace of ``text`` outside JSON strings."""
    in_str = esc = False
    for i, c in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{}":
            yield i, 1 if c == "{" else -1


def _depth(text: str) -> int:
    """Opening less closing braces of ``text``, outside strings."""
    return sum(d for _, d in _braces(text))


def _balanced_end(text: str) -> int | None:
    """Index just past the JSON-ish object ``text`` starts with, once its braces (outside
    strings) balance; None while it is still open."""
    depth = 0
    for i, d in _braces(text):
        depth += d
        if depth == 0:
            return i + 1
    return None


def _partial_tag(text: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of an open tag."""
    for n in range(min(_LONGEST_OPENER - 1, len(text)), 0, -1):
        if any(tag.startswith(text[-n:]) for tag in _OPENERS):
            return n
    return 0


def check_arguments(spec: ToolSpec, args: Mapping[str, Any]) -> str | None:
    """None if ``args`` fit the tool's schema, else what is wrong (told to the model).

    Checks the parts of JSON Schema tools use: required keys, unknown keys (unless
    ``additionalProperties``), each property's ``type`` and ``enum``. An integer given
    as a whole float (``10.0``) passes as an integer: models write both.
    """
    params = spec.parameters
    props: Mapping[str, Any] = params.get("properties", {}) or {}
    missing = [k for k in params.get("required", []) if k not in args]
    if missing:
        return f"{spec.name}: missing argument(s) {', '.join(missing)}"
    if not params.get("additionalProperties", False):
        unknown = [k for k in args if k not in props]
        if unknown:
            return f"{spec.name}: unknown argument(s) {', '.join(unknown)}"
    for k, v in args.items():
        p = props.get(k)
        if not isinstance(p, Mapping):
            continue
        typ = p.get("type")
        if isinstance(typ, str) and typ in _JSON_TYPES and not _is_type(v, typ):
            return f"{spec.name}: argument {k} must be a {typ}, got {v!r}"
        if "enum" in p and v not in p["enum"]:
            return f"{spec.name}: argument {k} must be one of {list(p['enum'])}"
    return None


def _is_type(v: Any, typ: str) -> bool:
    if isinstance(v, bool) and typ not in ("boolean",):
        return False
    if typ == "integer" and isinstance(v, float):
        return v.is_integer()
    return isinstance(v, _JSON_TYPES[typ])


def timer_seconds(args: Mapping[str, Any]) -> float:
    """A ``set_timer`` call's duration: its hours, minutes and seconds added up."""
    total = 0.0
    for key, scale in (("hours", 3600.0), ("minutes", 60.0), ("seconds", 1.0)):
        v = args.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"set_timer: {key} must be a number, got {v!r}")
        if v < 0:
            raise ValueError(f"set_timer: {key} must not be negative")
        total += float(v) * scale
    return total


def spoken_duration(seconds: float, plural: bool = False) -> str:
    """``600`` → ``"10 minute"`` (as in "your 10 minute timer"; ``plural``: ``"10
    minutes"``): the largest units that say it exactly, numbers as digits (the TTS
    front-end speaks them)."""
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    units = ((h, "hour"), (m, "minute"), (sec, "second"))
    parts = [f"{v} {u}{'s' if plural and v != 1 else ''}" for v, u in units if v]
    return " ".join(parts) if parts else ("0 seconds" if plural else "0 second")


_MONTHS = (
    "January February March April May June July August September October November December"
).split()


def spoken_clock(hhmm: str, weekday: str = "", date: str = "") -> str:
    """``get_current_time``'s result as one sentence: ``("15:41", "Friday", "2026-11-27")``
    → ``"It's 3:41 in the afternoon on Friday, November 27."`` (a 12-hour clock and the
    part of the day, as people say it; the TTS front-end reads the digits)."""
    h, m = (int(x) for x in hhmm.split(":")[:2])
    if not (0 <= h < 24 and 0 <= m < 60):
        raise ValueError(f"not a time of day: {hhmm!r}")
    if (h, m) == (12, 0):
        clock = "12:00 noon"
    elif (h, m) == (0, 0):
        clock = "12:00 midnight"
    else:
        part = (
            "at night" if h < 5 or h >= 22
            else "in the morning" if h < 12
            else "in the afternoon" if h < 18
            else "in the evening"
        )  # fmt: skip
        clock = f"{(h - 1) % 12 + 1}:{m:02d} {part}"
    day = ""
    if date:
        y, mo, d = (int(x) for x in date.split("-")[:3])
        day = f"{_MONTHS[mo - 1]} {d}"
    on = ", ".join(x for x in (weekday, day) if x)
    return f"It's {clock}" + (f" on {on}." if on else ".")


def judge_calls(expect: Mapping[str, Any], calls: list[Mapping[str, Any]]) -> tuple[bool, str]:
    """A reply's tool calls (``{"name", "arguments"}``, in order) against a question-set
    item (``voicepipe/bench/answers_set.toml``, kind ``tool``): the first call must be
    ``expect["tool"]``, with arguments giving ``seconds`` (set_timer: the duration) or
    ``value`` (calculate: the expression's value) when the item names them."""
    want = expect.get("tool")
    if not calls:
        return False, "no tool call"
    name, args = calls[0].get("name"), calls[0].get("arguments") or {}
    if name != want:
        return False, f"called {name!r}, not {want!r}"
    if "seconds" in expect:
        try:
            got = timer_seconds(args)
        except ValueError as e:
            return False, str(e)
        if abs(got - float(expect["seconds"])) > 1e-6:
            return False, f"timer of {got:g} s, not {expect['seconds']} s"
    if "value" in expect:
        try:
            v = calc.evaluate(str(args.get("expression", "")))
        except calc.CalcError as e:
            return False, f"expression {args.get('expression')!r}: {e}"
        if abs(v - float(expect["value"])) > 1e-9 * max(1.0, abs(v)):
            return False, f"{args.get('expression')!r} is {calc.format_number(v)}"
    return True, f"{name}({json.dumps(args, ensure_ascii=False)})"
