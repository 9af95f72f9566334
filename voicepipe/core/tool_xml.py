"""Tool calls written as XML instead of JSON, sans-I/O: read them rather than refuse them.

Why: Qwen2.5-Coder-1.5B now and then writes its call inside the tags in an XML dialect
instead of the template's JSON (greedy, `bench answers --tools` on the Zen 4 host: "I
need a timer set for ten minutes." →
``<tools><function><name>set_timer</name><arguments><minutes>10</minutes>…``). Told
that the call was not JSON, it gave up ("I'm sorry, but I can't assist with that."),
though the call said exactly what it meant. Two dialects are read:

    <function><name>set_timer</name><arguments><minutes>10</minutes></arguments></function>
    <function=set_timer><parameter=minutes>10</parameter></function>   (Qwen3-Coder's)

(the ``<function>`` wrapper optional in the first; ``<arguments>`` may also hold a JSON
object). XML has no types, so each value's text is read by the type the tool's schema
gives its key (``types``: tool → key → JSON type): ``"10"`` is 10 for a number and
``"10"`` for a string; a text that does not read as its type stays text, and the
schema check (``check_arguments``) tells the model what is wrong, as for JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

# name → {key → JSON type ("" when the schema gives none)}
Types = Mapping[str, Mapping[str, str]]

_NAME = re.compile(r"<name>\s*([^<]*?)\s*</name>", re.S)
_ARGS = re.compile(r"<arguments>(.*?)</arguments>", re.S)
_ELEM = re.compile(r"<([A-Za-z_][\w.-]*)>(.*?)</\1\s*>", re.S)
_FN_EQ = re.compile(r"<function=\s*([^>\s]+)\s*>", re.S)
_PARAM_EQ = re.compile(r"<parameter=\s*([^>\s]+)\s*>(.*?)</parameter\s*>", re.S)
_CONTAINERS: dict[str, type] = {"object": dict, "array": list, "null": type(None)}


def parse_xml_call(raw: str, types: Types) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` of an XML call, or None: ``raw`` is not one of the dialects
    (the caller then reports it as not JSON)."""
    text = raw.strip()
    if not text.startswith("<"):
        return None
    m = _FN_EQ.search(text)
    if m is not None:
        name = m.group(1)
        pairs = _PARAM_EQ.findall(text[m.end() :])
    else:
        n = _NAME.search(text)
        if n is None or not n.group(1):
            return None
        name = n.group(1)
        a = _ARGS.search(text, n.end()) or _ARGS.search(text)
        body = a.group(1).strip() if a is not None else ""
        if body.startswith("{"):  # JSON arguments in XML tags: typed already
            try:
                obj = json.loads(body)
            except json.JSONDecodeError:
                return None
            return (name, obj) if isinstance(obj, dict) else None
        pairs = _ELEM.findall(body)
    keys = types.get(name, {})
    return name, {k: typed(v.strip(), keys.get(k, "")) for k, v in pairs}


def typed(text: str, typ: str) -> Any:
    """An XML value's text as the JSON type its schema names; the text itself when it
    does not read as that type (or the type is a string)."""
    if typ == "string":
        return text
    try:
        v = json.loads(text)
    except json.JSONDecodeError:
        return text
    if typ in ("number", "integer"):
        ok = isinstance(v, int | float) and not isinstance(v, bool)
    elif typ == "boolean":
        ok = isinstance(v, bool)
    elif typ in _CONTAINERS:
        ok = isinstance(v, _CONTAINERS[typ])
    else:  # no type given: a scalar JSON reads as itself, anything else is text
        ok = isinstance(v, int | float | bool) or v is None
    return v if ok else text


def schema_types(specs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """``Types`` from the chat template's tool entries (or bare functions)."""
    out: dict[str, dict[str, str]] = {}
    for spec in specs:
        fn = spec.get("function", spec)
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            continue
        props = (fn.get("parameters") or {}).get("properties") or {}
        out[fn["name"]] = {str(k): prop_type(p) for k, p in props.items()}
    return out


def prop_type(prop: Any) -> str:
    """A property's one JSON type, or "" (none given, or a list of types)."""
    t = prop.get("type") if isinstance(prop, Mapping) else None
    return t if isinstance(t, str) else ""
