"""Jump-forward decoding of tool calls, sans-I/O: what text a call must go on with.

Why: once a model has opened a tool call, most of the call's text follows from the
tools' JSON schemas (the key ``"name"``, the rest of a tool's name once its first
characters pick one tool, ``"arguments"``, the keys the schema requires, the closing
braces and tag, the end of the turn). Decoding that text token by token costs a model
pass per token; forced, it enters the KV cache in one pass (SGLang's compressed finite
state machine), and only the real choices (which tool, which optional key, each
value) cost a pass each.

``CallGrammar.next(reply)`` reads the reply's text so far (special tags as text) and
answers with a ``Jump``: the fixed text that must come next (``""`` at a choice),
samples of what may follow it (for the caller's token-boundary check: forced text must
end where the model's own tokens would), and whether the turn ends after it. None: the
reply is not inside a call, or the call left the canonical form (then nothing is
forced and the model writes the rest itself).

The canonical form is the one Qwen2.5-Coder writes and the chat template shows:
``{"name": "set_timer", "arguments": {"minutes": 10}}`` (``json.dumps`` spacing, keys in
schema order), bare (one or two opening braces: the template's literal ``{{…}}``, see
core/tools.py) or inside a tag (``<tool_call>`` or ``<tools>``, each closed by its own
end tag on a new line). Closing braces are forced balanced: a model that writes a
surplus brace (the 1.5B closes a bare timer call with four) makes the same call
(``CallSplitter`` drops the surplus), so the call is unchanged.

What is a choice here: the braces that open a bare call, whether a tool without
parameters gets ``"arguments"``, which optional key comes next (or none), every value
(a string's content up to its closing quote; a number, boolean or null up to the
character after it). A required key is forced only when no unused optional key comes
before it in the schema (the model writes keys in schema order; an optional key before
it could still be chosen).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicepipe.core.tool_xml import prop_type
from voicepipe.core.tools import TAGS

NAME_KEY = '"name": "'
ARGS_KEY = ', "arguments": {'
# Samples of a value's first characters by JSON type, for the token-boundary check of
# the text forced before it (``": "`` must not be cut where a value would merge with it).
_VALUE_STARTS = {
    "string": ("a", "Ten", "1", " ", "the"),
    "number": ("1", "0", "-1", "2.5"),
    "integer": ("1", "0", "-1"),
    "boolean": ("true", "false"),
}
_ANY_VALUE = ('"a', "1", "-1", "true", "null", "[", "{")


@dataclass(frozen=True)
class Jump:
    """What a call goes on with: ``text`` forced (may be empty: a choice comes first),
    ``follow``: samples of what may come after it, ``end``: the turn ends after it."""

    text: str
    follow: tuple[str, ...] = ()
    end: bool = False


@dataclass(frozen=True)
class _Tool:
    name: str
    keys: tuple[str, ...]  # the properties in schema order
    required: frozenset[str]
    types: Mapping[str, str]  # key -> JSON type ("" when not one plain type)


class CallGrammar:
    """The call forms of a set of tools (``specs``: the chat template's entries,
    ``{"type": "function", "function": {"name", "parameters"}}``, or bare functions)."""

    def __init__(self, specs: Sequence[Mapping[str, Any]]) -> None:
        tools: dict[str, _Tool] = {}
        for spec in specs:
            fn = spec.get("function", spec)
            name = fn.get("name") if isinstance(fn, Mapping) else None
            if not isinstance(name, str) or not name or '"' in name or "\\" in name:
                raise ValueError(f"tool name {name!r} cannot be forced")
            params = fn.get("parameters") or {}
            props = params.get("properties") or {}
            if not isinstance(props, Mapping):
                raise ValueError(f"{name}: properties must be an object")
            keys = tuple(str(k) for k in props)
            if any(json.dumps(k) != f'"{k}"' for k in keys):
                raise ValueError(f"{name}: a key that JSON escapes cannot be forced")
            types = {str(k): prop_type(p) for k, p in props.items()}
            req = frozenset(str(k) for k in params.get("required", []) or [] if k in props)
            tools[name] = _Tool(name, keys, req, types)
        if not tools:
            raise ValueError("no tools")
        self.tools = tools

    def next(self, reply: str) -> Jump | None:
        """The text ``reply`` (this turn's reply so far, tags as text) must go on with,
        if it is inside a call in the canonical form; consecutive fixed parts joined."""
        found = _open_call(reply)
        if found is None:
            return None
        body, close_tag = found
        out = ""
        follow: tuple[str, ...] = ()
        while True:
            j = self._step(body + out, close_tag)
            if j is None:
                return Jump(out, follow) if out else None
            if j.end:  # nothing follows but the end of the turn: no sample to cut by
                return Jump(out + j.text, (), True)
            if not j.text:  # (a choice inside a value: the part before knows more)
                return Jump(out, j.follow or follow)
            out += j.text
            follow = j.follow

    # ------------------------------------------------------------------ parsing

    def _step(self, s: str, close_tag: str | None) -> Jump | None:
        """One fixed part (or a choice) after the call's JSON text ``s``."""
        n = 0
        while n < len(s) and s[n] == "{":
            n += 1
        if n == 0 or n > 2:
            return None
        i = n
        if i == len(s):
            return Jump("", ("{", '"')) if n == 1 else Jump(NAME_KEY, tuple(self.tools))
        r = _lit(s, i, NAME_KEY, tuple(self.tools))
        if isinstance(r, Jump) or r is None:
            return r
        i = r
        end = s.find('"', i)
        if end < 0:  # inside the name: the candidates' common prefix is fixed
            return _choose(s[i:], list(self.tools), '"')
        tool = self.tools.get(s[i:end])
        if tool is None:
            return None
        i = end + 1
        closing = "}" * n + ("\n" + close_tag if close_tag else "")
        if not tool.keys:  # no parameters: '}' or ', "arguments": {}' is the model's choice
            if i == len(s):
                return Jump("", ("}" * n, ', "arguments": {}'))
            if s[i] == ",":
                r = _lit(s, i, ARGS_KEY + "}", ("}",))
                if isinstance(r, Jump) or r is None:
                    return r
                i = r
            return _close(s, i, closing)
        r = _lit(s, i, ARGS_KEY, ('"', "}"))
        if isinstance(r, Jump) or r is None:
            return r
        return self._args(s, r, tool, closing)

    def _args(self, s: str, i: int, tool: _Tool, closing: str) -> Jump | None:
        used: list[str] = []
        first = True
        while True:
            left = [k for k in tool.keys if k not in used]
            forced = _forced_key(tool, left)
            if i == len(s):  # a key (or the end of the arguments) comes next
                if forced is not None:
                    return Jump(
                        ("" if first else ", ") + f'"{forced}": ', self._starts(tool, forced)
                    )
                if not left:
                    return Jump("}" + closing, (), end=True)
                return Jump("", (("" if first else ", ") + '"', "}"))
            if s[i] == "}" and forced is None:
                return _close(s, i + 1, closing)
            if not left:  # every key written: only the closing brace fits
                return None
            if not first:
                r = _lit(s, i, ', "', tuple(left))
                if isinstance(r, Jump) or r is None:
                    return r
                i = r
            elif s[i] == '"':
                i += 1
            else:
                return None
            if forced is not None:  # its name is fixed too
                r = _lit(s, i, f'{forced}": ', self._starts(tool, forced))
                if isinstance(r, Jump) or r is None:
                    return r
                key, i = forced, r
            else:
                end = s.find('"', i)
                if end < 0:
                    return _choose(s[i:], left, '"')
                key = s[i:end]
                if key not in left:
                    return None
                r = _lit(s, end + 1, ": ", self._starts(tool, key))
                if isinstance(r, Jump) or r is None:
                    return r
                i = r
            used.append(key)
            first = False
            if tool.types.get(key) == "string":  # its opening quote is fixed
                r = _lit(s, i, '"', _VALUE_STARTS["string"])
                if isinstance(r, Jump) or r is None:
                    return r
                i = r - 1
            v = _value_end(s, i)
            if v is None:  # inside the value (or a value the grammar does not read)
                return Jump("", ())
            if v < 0:
                return None
            i = v

    def _starts(self, tool: _Tool, key: str) -> tuple[str, ...]:
        return _VALUE_STARTS.get(tool.types.get(key, ""), _ANY_VALUE)


def _forced_key(tool: _Tool, left: list[str]) -> str | None:
    """The next key when it is fixed: the first unused key is required (an optional
    key before a required one could still be chosen)."""
    return left[0] if left and left[0] in tool.required else None


def _lit(s: str, i: int, want: str, follow: tuple[str, ...]) -> int | Jump | None:
    """``s[i:]`` against the literal ``want``: past it (an index), inside it (the rest as
    a Jump), or off it (None)."""
    rest = s[i : i + len(want)]
    if not want.startswith(rest):
        return None
    if len(rest) < len(want):
        return Jump(want[len(rest) :], follow)
    return i + len(want)


def _choose(prefix: str, names: list[str], after: str) -> Jump | None:
    """Inside a name or key: the part every candidate starting with ``prefix`` shares is
    fixed (and ``after``, its closing quote, once only one is left)."""
    cands = [n for n in names if n.startswith(prefix)]
    if not cands:
        return None
    if len(cands) == 1:
        return Jump(cands[0][len(prefix) :] + after, ())
    common = os.path.commonprefix(cands)
    follow = tuple(c[len(common) :] for c in cands)
    return Jump(common[len(prefix) :], tuple(f or after for f in follow))


def _close(s: str, i: int, closing: str) -> Jump | None:
    r = _lit(s, i, closing, ())
    if isinstance(r, int):  # the call is complete: the turn ends
        return Jump("", (), end=True) if r == len(s) else None
    if r is not None:
        return Jump(r.text, (), end=True)
    return None


def _value_end(s: str, i: int) -> int | None:
    """Index just past the JSON value starting at ``s[i]``, once the character after it
    (for a scalar) is known; None while it may go on; -1 for a value not read here
    (objects, arrays: nothing more is forced in this call)."""
    if i >= len(s):
        return None
    c = s[i]
    if c == '"':
        esc = False
        for j in range(i + 1, len(s)):
            if esc:
                esc = False
            elif s[j] == "\\":
                esc = True
            elif s[j] == '"':
                return j + 1
        return None
    if c in "[{":
        return -1
    for j in range(i, len(s)):
        if s[j] in ",} \n":
            return j
    return None


def _open_call(reply: str) -> tuple[str, str | None] | None:
    """(the call's JSON text so far, the tag that closes it or None for a bare call) if
    ``reply`` ends inside a call."""
    bare = reply.lstrip()
    if bare.startswith("{"):
        return bare, None
    best = -1
    tag = ""
    for t in TAGS:
        k = reply.rfind(t)
        if k > best:
            best, tag = k, t
    if best < 0:
        return None
    body = reply[best + len(tag) :]
    if TAGS[tag] in body:
        return None
    # the newline after the tag is the model's (an empty call "<tools></tools>" is too)
    if not body.startswith("\n") or not body[1:].startswith("{"):
        return None
    return body[1:], TAGS[tag]
