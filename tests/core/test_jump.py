"""Jump-forward decoding's grammar (core/jump.py): what a tool call must go on with."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.core.jump import CallGrammar, Jump
from voicepipe.core.tools import CallSplitter, ToolCall

TIMER = {"type": "object", "required": [], "properties": {
    "hours": {"type": "number"}, "minutes": {"type": "number"},
    "seconds": {"type": "number"}, "label": {"type": "string"}}}  # fmt: skip
CALC = {"type": "object", "required": ["expression"],
        "properties": {"expression": {"type": "string"}}}  # fmt: skip
SPECS = [
    {"type": "function", "function": {"name": "set_timer", "parameters": TIMER}},
    {"type": "function", "function": {"name": "get_current_time", "parameters": {}}},
    {"type": "function", "function": {"name": "calculate", "parameters": CALC}},
]
G = CallGrammar(SPECS)


def forced_at(g: CallGrammar, text: str) -> dict[int, Jump]:
    """Every prefix of ``text`` at which something is fixed, and what."""
    out = {}
    for i in range(len(text) + 1):
        j = g.next(text[:i])
        if j is not None and (j.text or j.end):
            out[i] = j
    return out


# The calls Qwen2.5-Coder-1.5B wrote for bench answers --tools (greedy, no forcing).
QWEN_CALLS = [
    '{{"name": "set_timer", "arguments": {"hours": 0, "minutes": 10, "seconds": 0, '
    '"label": "Ten minutes"}}}}',
    '<tools>\n{"name": "set_timer", "arguments": {"hours": 0, "minutes": 10, "seconds": 0, '
    '"label": "Count down"}}\n</tools>',
    '{{"name": "get_current_time"}}',
    '{{"name": "calculate", "arguments": {"expression": "17 * 23"}}}',
]


@pytest.mark.parametrize("text", QWEN_CALLS)
def test_forced_text_is_what_the_model_wrote(text: str) -> None:
    for i, j in forced_at(G, text).items():
        rest = text[i:]
        if j.end:  # forced braces are balanced: a surplus brace is the only difference
            assert (text[:i] + j.text).rstrip("}") == text.rstrip("}"), (i, j)
        else:
            assert rest.startswith(j.text), (i, j)


def fixed(text: str) -> tuple[str, bool] | None:
    j = G.next(text)
    return None if j is None else (j.text, j.end)


def test_what_is_fixed_and_what_is_chosen() -> None:
    calc = QWEN_CALLS[3]
    assert G.next("{{") == Jump('"name": "', ("set_timer", "get_current_time", "calculate"))
    # which tool: the model's choice (the names are the samples of what comes next)
    assert G.next('{{"name": "') == Jump("", ("set_timer", "get_current_time", "calculate"))
    # one letter picks the calculator; then everything up to the value is fixed
    j = G.next('{{"name": "c')
    assert j is not None and j.text == 'alculate", "arguments": {"expression": "'
    assert "a" in j.follow  # samples of a string value, for the token-boundary check
    assert fixed(calc[: calc.index("17") + 2]) == ("", False)  # inside the value
    assert fixed(calc[: calc.index('"}}') + 3]) == ("}", True)
    # no parameters: '}}' or ', "arguments": {}' is the model's to choose
    j = G.next('{{"name": "get')
    assert j == Jump('_current_time"', ("}}", ', "arguments": {}'))
    # ... it chose the arguments: the rest and the closing braces are fixed, and since
    # the turn ends after them nothing follows that could merge with the last brace
    # (the empty object's own follow, "}", once carried over and cut the forced text
    # before its braces, so the turn ended on an unclosed call)
    assert G.next('{{"name": "get_current_time",') == Jump(' "arguments": {}}}', (), True)
    # optional keys: which one (or none) is a choice; once its first letters pick one,
    # the rest of the key is fixed
    t = '{"name": "set_timer", "arguments": {'
    assert G.next(t) == Jump("", ('"', "}"))
    assert G.next(t + '"m') == Jump('inutes": ', ("1", "0", "-1", "2.5"))
    assert fixed(t + '"minutes": 5') == ("", False)
    assert G.next(t + '"minutes": 5,') == Jump(' "', ("hours", "seconds", "label"))
    assert G.next(t + '"minutes": 5}') == Jump("}", (), end=True)
    assert fixed(t + '"label": "x", "hours": 1, "minutes": 2, "seconds": 3') == ("", False)
    assert fixed(t + '"label": "x", "hours": 1, "minutes": 2, "seconds": 3,') is None
    # the last key left after a comma is fixed whole
    assert fixed(t + '"hours": 1, "minutes": 2, "seconds": 3,') == (' "label": "', False)
    # the tagged form closes with its own tag on a new line, then the turn ends
    tagged = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "1"}'
    assert fixed(tagged) == ("}\n</tool_call>", True)
    assert fixed(tagged.replace("tool_call", "tools")) == ("}\n</tools>", True)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Sure, ten minutes.",
        "It is {not} a call",  # speech: only a reply that starts with a brace is a call
        "<tool_call>",  # the newline and brace after a tag are the model's
        "<tools></tools>",  # an empty call: the model's choice (the stage asks again)
        '<tool_call>\n{"name": "calculate"}\n</tool_call>',  # closed
        '{"name":"calculate"',  # not the canonical spacing: nothing forced
        '{"name": "play_music',  # no such tool
        '{{{"name": "',
        '{"name": "calculate", "arguments": {"expression": "1"}}} and more',
        '{"name": "calculate", "arguments": {"expression": ["x"',  # a value not read here
    ],
)
def test_nothing_is_forced_outside_a_canonical_call(text: str) -> None:
    j = G.next(text)
    assert j is None or (j.text == "" and not j.end)


def test_bad_tool_sets_are_refused() -> None:
    with pytest.raises(ValueError):
        CallGrammar([])
    with pytest.raises(ValueError):
        CallGrammar([{"name": 'say "hi"', "parameters": {}}])
    with pytest.raises(ValueError):
        CallGrammar([{"name": "f", "parameters": {"properties": {'a"b': {}}}}])


# ----------------------------------------------------------------- property tests

KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
VALUES = {
    "string": st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
    "number": st.one_of(st.integers(-(10**6), 10**6), st.floats(-1e6, 1e6, allow_nan=False)),
    "integer": st.integers(-(10**6), 10**6),
    "boolean": st.booleans(),
}


@st.composite
def tools_and_call(draw):  # type: ignore[no-untyped-def]
    names = draw(st.lists(KEY, min_size=1, max_size=4, unique=True))
    specs = []
    for name in names:
        keys = draw(st.lists(KEY, max_size=4, unique=True))
        types = {k: draw(st.sampled_from(sorted(VALUES))) for k in keys}
        req = [k for k in keys if draw(st.booleans())]
        props = {k: {"type": t} for k, t in types.items()}
        specs.append({"name": name, "parameters": {"properties": props, "required": req}})
    spec = draw(st.sampled_from(specs))
    props = spec["parameters"]["properties"]
    req = spec["parameters"]["required"]
    # the keys in schema order: every required one, any optional ones
    keys = [k for k in props if k in req or draw(st.booleans())]
    args = {k: draw(VALUES[props[k]["type"]]) for k in keys}
    with_args = bool(props) or draw(st.booleans())
    obj = {"name": spec["name"], **({"arguments": args} if with_args else {})}
    body = json.dumps(obj, ensure_ascii=False)
    form = draw(st.sampled_from(["{", "{{", "<tool_call>", "<tools>"]))
    if form == "{{":
        text = "{" + body + "}"
    elif form == "{":
        text = body
    else:
        text = f"{form}\n{body}\n{form.replace('<', '</')}"
    return specs, text, obj


@settings(max_examples=150, deadline=None)
@given(tools_and_call())
def test_forcing_a_canonical_call_writes_that_call(case) -> None:  # type: ignore[no-untyped-def]
    specs, text, obj = case
    g = CallGrammar(specs)
    # Decode it with forcing: the model writes one character at each choice, the
    # grammar's fixed text comes in one piece; the result is the same call, and the
    # forced text is always exactly what the call holds there.
    out = ""
    forced = 0
    while True:
        j = g.next(out)
        if j is not None and j.text:
            assert text.startswith(out + j.text), (out, j)
            out += j.text
            forced += len(j.text)
        if j is not None and j.end:
            break
        if len(out) == len(text):
            break
        out += text[len(out)]
    assert out == text
    events = CallSplitter().push(out) + CallSplitter().flush()
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert calls and calls[0].name == obj["name"]
    assert calls[0].arguments == obj.get("arguments", {})
    assert forced >= len('name": "') - 1  # at least the key "name" was never decoded
