"""Tool calls, sans-I/O: the stream splitter, call parsing, argument checks, judging."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicepipe.core.tools import (
    BadCall,
    CallSplitter,
    Speech,
    ToolCall,
    ToolSpec,
    check_arguments,
    judge_calls,
    parse_call,
    spoken_clock,
    spoken_duration,
    timer_seconds,
)

TAGGED = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "17 * 23"}}\n</tool_call>'
# What Qwen2.5-Coder-1.5B writes after its GGUF template's literal {{"name": …}}: no tags,
# doubled braces, one closing brace too many.
BARE = '{{"name": "set_timer", "arguments": {"minutes": 10, "label": "tea"}}}}'


def _split(text: str, cuts: list[int]) -> list[object]:
    sp = CallSplitter()
    out: list[object] = []
    last = 0
    for c in sorted(set(cuts)):
        out += sp.push(text[last:c])
        last = c
    out += sp.push(text[last:])
    return out + sp.flush()


def _merged(events: list[object]) -> list[object]:
    """Adjacent Speech events joined (how they are cut depends on the deltas)."""
    out: list[object] = []
    for e in events:
        if isinstance(e, Speech) and out and isinstance(out[-1], Speech):
            out[-1] = Speech(out[-1].text + e.text)
        else:
            out.append(e)
    return out


CASES = [
    (TAGGED, [ToolCall("calculate", {"expression": "17 * 23"})]),
    (BARE, [ToolCall("set_timer", {"minutes": 10, "label": "tea"})]),
    (
        "Sure. " + TAGGED + " It is 391.",
        [Speech("Sure. "), ToolCall("calculate", {"expression": "17 * 23"}), Speech(" It is 391.")],
    ),
    (
        BARE + "\nTimer set.",
        [ToolCall("set_timer", {"minutes": 10, "label": "tea"}), Speech("Timer set.")],
    ),  # fmt: skip
    ('{{"name": "get_current_time"}}', [ToolCall("get_current_time", {})]),
    ("Paris is the capital.", [Speech("Paris is the capital.")]),
    ("{not a call} said aloud", [Speech("{not a call} said aloud")]),
    ("a < b and <tool", [Speech("a < b and <tool")]),
    (
        "<tool_call>{oops}</tool_call>",
        [BadCall("{oops}", "not JSON: Expecting property name enclosed in double quotes")],
    ),  # fmt: skip
    # The 1.5B sometimes wraps its call in the tools block's tags, or leaves them empty.
    (
        '<tools> {"name": "set_timer", "arguments": {"minutes": 10}} </tools>',
        [ToolCall("set_timer", {"minutes": 10})],
    ),  # fmt: skip
    ("<tools></tools>", [BadCall("", 'empty: write {"name": …, "arguments": {…}} in the tags')]),
    # Braces inside an argument's string are text, not the call's own (bare and doubled).
    ('{"name": "note", "arguments": {"text": "}"}}', [ToolCall("note", {"text": "}"})]),
    ('{{"name": "note", "arguments": {"text": "a}b{"}}}}', [ToolCall("note", {"text": "a}b{"})]),
    # An echoed tool result is dropped, closed or not (what the 1.5B said after a bad call)
    (
        'Sorry. <tool_response>\n{"error": "bad"}\n</tool_response> Again?',
        [Speech("Sorry.  Again?")],
    ),  # fmt: skip
    ('<tool_response>\n{"error": "bad tool call (not JSON). Call again', []),
    # A reply cut off inside a call still made it (and says nothing of it).
    (
        '<tool_call>\n{"name": "calculate", "arguments": {"expression": "2+2"}}',
        [ToolCall("calculate", {"expression": "2+2"})],
    ),  # fmt: skip
]


@pytest.mark.parametrize(("text", "want"), CASES)
def test_splitter_whole(text: str, want: list[object]) -> None:
    assert _merged(_split(text, [])) == want


@pytest.mark.parametrize(("text", "want"), CASES)
@given(cuts=st.lists(st.integers(0, 200), max_size=12))
def test_splitter_any_delta_boundaries(text: str, want: list[object], cuts: list[int]) -> None:
    got = _merged(_split(text, [c % (len(text) + 1) for c in cuts]))
    assert got == want


@given(st.text(max_size=80))
def test_speech_never_carries_a_tag_and_loses_no_plain_text(text: str) -> None:
    events = _split(text, [len(text) // 2])
    spoken = "".join(e.text for e in events if isinstance(e, Speech))
    assert "<tool_call>" not in spoken and "<tool_response>" not in spoken
    tagged = any(t in text for t in ("<tool_call>", "<tools>", "<tool_response>"))
    if not tagged and not text.lstrip().startswith("{"):
        assert spoken == text or spoken.strip() == text.strip()


def test_parse_call_forms() -> None:
    assert parse_call('{"name": "f", "arguments": "{\\"a\\": 1}"}') == ToolCall("f", {"a": 1})
    assert parse_call('{"name": "f", "arguments": null}') == ToolCall("f", {})
    assert isinstance(parse_call('{"arguments": {}}'), BadCall)
    assert isinstance(parse_call('{"name": "f", "arguments": [1]}'), BadCall)
    assert isinstance(parse_call("[]"), BadCall)


SPEC = ToolSpec(
    "set_timer",
    "a timer",
    {
        "type": "object",
        "properties": {"minutes": {"type": "number"}, "n": {"type": "integer"},
                       "unit": {"type": "string", "enum": ["s", "m"]}},
        "required": ["minutes"],
    },
)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"minutes": 10}, None),
        ({"minutes": 2.5, "n": 3.0, "unit": "m"}, None),
        ({}, "missing argument(s) minutes"),
        ({"minutes": 1, "hours": 2}, "unknown argument(s) hours"),
        ({"minutes": "ten"}, "argument minutes must be a number"),
        ({"minutes": True}, "argument minutes must be a number"),
        ({"minutes": 1, "n": 1.5}, "argument n must be a integer"),
        ({"minutes": 1, "unit": "h"}, "argument unit must be one of"),
    ],
)
def test_check_arguments(args: dict, error: str | None) -> None:
    got = check_arguments(SPEC, args)
    assert (got is None) if error is None else (got is not None and error in got)


def test_timer_seconds_and_spoken_duration() -> None:
    assert timer_seconds({"minutes": 10}) == 600
    assert timer_seconds({"hours": 1, "minutes": 0.5, "seconds": 3}) == 3633
    with pytest.raises(ValueError):
        timer_seconds({"minutes": "10"})
    with pytest.raises(ValueError):
        timer_seconds({"minutes": -1})
    assert spoken_duration(600) == "10 minute"
    assert spoken_duration(3690) == "1 hour 1 minute 30 second"
    assert spoken_duration(3690, plural=True) == "1 hour 1 minute 30 seconds"


@pytest.mark.parametrize(
    ("expect", "calls", "ok"),
    [
        ({"tool": "set_timer", "seconds": 600}, [{"name": "set_timer",
                                                  "arguments": {"minutes": 10}}], True),
        ({"tool": "set_timer", "seconds": 600}, [{"name": "set_timer",
                                                  "arguments": {"seconds": 600}}], True),
        ({"tool": "set_timer", "seconds": 600}, [{"name": "set_timer",
                                                  "arguments": {"minutes": 1}}], False),
        ({"tool": "set_timer", "seconds": 600}, [], False),
        ({"tool": "calculate", "value": 391}, [{"name": "calculate",
                                                "arguments": {"expression": "17*23"}}], True),
        ({"tool": "calculate", "value": 391}, [{"name": "calculate",
                                                "arguments": {"expression": "17+23"}}], False),
        ({"tool": "calculate", "value": 391}, [{"name": "calculate", "arguments": {}}], False),
        ({"tool": "get_current_time"}, [{"name": "get_current_time", "arguments": {}}], True),
        ({"tool": "get_current_time"}, [{"name": "calculate", "arguments": {}},
                                        {"name": "get_current_time", "arguments": {}}], False),
    ],
)  # fmt: skip
def test_judge_calls(expect: dict, calls: list, ok: bool) -> None:
    assert judge_calls(expect, calls)[0] is ok


def test_spoken_clock() -> None:
    assert spoken_clock("15:41", "Friday", "2026-11-27") == (
        "It's 3:41 in the afternoon on Friday, November 27."
    )
    assert spoken_clock("09:05") == "It's 9:05 in the morning."
    assert spoken_clock("19:30", "Monday") == "It's 7:30 in the evening on Monday."
    assert spoken_clock("23:59") == "It's 11:59 at night."
    assert spoken_clock("12:00") == "It's 12:00 noon."
    assert spoken_clock("00:00") == "It's 12:00 midnight."
    assert spoken_clock("00:10") == "It's 12:10 at night."
    with pytest.raises(ValueError, match="not a time of day"):
        spoken_clock("25:00")
