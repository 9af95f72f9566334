"""Realtime items and tools as the LLM takes them (core/realtime/llm.py)."""

from __future__ import annotations

import json

from voicepipe.core.realtime.events import (
    ContentPart,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    MessageItem,
)
from voicepipe.core.realtime.llm import chat_message, token_budget, tool_spec


def test_messages_take_the_text_of_every_part() -> None:
    item = MessageItem(
        role="user",
        content=(ContentPart(type="input_text", text=" Hi "), ContentPart(type="input_audio",
                 transcript="there")),
    )  # fmt: skip
    assert chat_message(item) == {"role": "user", "content": "Hi there"}
    silent = MessageItem(role="user", content=(ContentPart(type="input_audio"),))
    assert chat_message(silent) is None  # audio without a transcript says nothing


def test_function_calls_and_outputs_become_the_templates_messages() -> None:
    call = FunctionCallItem(name="get_weather", arguments='{"city": "Paris"}', call_id="c1")
    msg = chat_message(call)
    assert msg is not None and msg["role"] == "assistant"
    assert msg["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": {"city": "Paris"},
    }
    bad = chat_message(FunctionCallItem(name="f", arguments="{not json"))
    assert bad is not None and bad["tool_calls"][0]["function"]["arguments"] == {}
    out = chat_message(FunctionCallOutputItem(call_id="c1", output='{"sky": "blue"}'))
    assert out == {"role": "tool", "content": '{"sky": "blue"}'}


def test_tools_and_budgets() -> None:
    params = {"type": "object", "properties": {"city": {"type": "string"}}}
    spec = tool_spec(FunctionTool(name="w", description="d", parameters_json=json.dumps(params)))
    assert spec == {"type": "function", "function": {"name": "w", "description": "d",
                                                     "parameters": params}}  # fmt: skip
    empty = tool_spec(FunctionTool(name="n"))["function"]["parameters"]
    assert empty == {"type": "object", "properties": {}}
    assert token_budget("inf") == 0 and token_budget(64) == 64
