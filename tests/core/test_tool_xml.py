"""Tool calls written as XML (core/tool_xml.py), read by their schemas' types."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voicepipe.core.tool_xml import parse_xml_call, schema_types, typed
from voicepipe.core.tools import BadCall, CallSplitter, Speech, ToolCall, parse_call
from voicepipe.tools import BUILTINS

TYPES = schema_types([BUILTINS[n].spec.for_template() for n in sorted(BUILTINS)])

# What Qwen2.5-Coder-1.5B wrote, greedy, for "I need a timer set for ten minutes."
# (`bench answers --tools` on the Zen 4 host), as its deltas came.
QWEN_XML = [
    "<", "tools>\n ", " <function>\n   ", " <name>set", "_timer</name", ">\n    <",
    "arguments>\n      <", "hours", ">0", "</", "hours", ">\n     ", " <minutes", ">",
    "1", "0", "</", "minutes", ">\n     ", " <seconds", ">", "0", "</seconds",
    ">\n      <", "label", ">Timer", " for", " 1", "0 minutes", "</", "label", ">\n   ",
    " </", "arguments>\n", "  </function", ">\n</tools>",
]  # fmt: skip


def test_the_schemas_give_the_types() -> None:
    assert TYPES["set_timer"] == {
        "hours": "number", "minutes": "number", "seconds": "number", "label": "string",
    }  # fmt: skip
    assert TYPES["get_current_time"] == {}
    assert TYPES["calculate"] == {"expression": "string"}


def test_the_15bs_xml_timer_is_the_call_it_meant() -> None:
    sp = CallSplitter(TYPES)
    events = [e for d in QWEN_XML for e in sp.push(d)] + sp.flush()
    want = {"hours": 0, "minutes": 10, "seconds": 0, "label": "Timer for 10 minutes"}
    assert events == [ToolCall("set_timer", want)]
    # without the types (a splitter that does not know the tools) it stays a bad call
    sp = CallSplitter()
    events = [e for d in QWEN_XML for e in sp.push(d)] + sp.flush()
    assert len(events) == 1 and isinstance(events[0], BadCall)
    assert "not JSON" in events[0].error


def test_the_dialects() -> None:
    qwen3 = "<function=calculate>\n<parameter=expression>\n17 * 23\n</parameter>\n</function>"
    assert parse_call(qwen3, TYPES) == ToolCall("calculate", {"expression": "17 * 23"})
    bare = "<name>get_current_time</name>"  # no wrapper, no arguments
    assert parse_call(bare, TYPES) == ToolCall("get_current_time", {})
    json_args = '<function><name>set_timer</name><arguments>{"minutes": 5}</arguments></function>'
    assert parse_call(json_args, TYPES) == ToolCall("set_timer", {"minutes": 5})
    # a tool the schemas do not know: values that read as JSON scalars are typed anyway,
    # and the toolbox says there is no such tool
    got = parse_call("<function=play><parameter=volume>3</parameter></function>", TYPES)
    assert got == ToolCall("play", {"volume": 3})


def test_what_is_not_an_xml_call_stays_a_bad_call() -> None:
    for raw in ("<function></function>", "<b>bold</b>", "name: set_timer", "<name></name>",
                "<name>set_timer</name><arguments>{bad json}</arguments>"):  # fmt: skip
        assert parse_xml_call(raw, TYPES) is None, raw
        assert isinstance(parse_call(raw, TYPES), BadCall), raw
    # speech that merely contains angle brackets is never read as a call
    sp = CallSplitter(TYPES)
    assert sp.push("Use <name>x</name> tags.") + sp.flush() == [Speech("Use <name>x</name> tags.")]


def test_values_are_read_as_their_type() -> None:
    assert typed("10", "number") == 10 and typed("2.5", "number") == 2.5
    assert typed("ten", "number") == "ten"  # the schema check then tells the model
    assert typed("true", "number") == "true"  # a boolean is not a number
    assert typed("10", "string") == "10"
    assert typed("false", "boolean") is False and typed("no", "boolean") == "no"
    assert typed("[1, 2]", "array") == [1, 2] and typed("[1, 2]", "") == "[1, 2]"
    assert typed("null", "") is None and typed("7", "") == 7


@given(st.text(alphabet=st.characters(blacklist_characters="<>&"), min_size=1, max_size=30))
def test_a_string_argument_keeps_its_text(label: str) -> None:
    raw = (
        f"<function><name>set_timer</name><arguments><label>{label}</label></arguments></function>"
    )
    got = parse_call(raw, TYPES)
    assert got == ToolCall("set_timer", {"label": label.strip()})
