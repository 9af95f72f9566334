"""Realtime API objects as the LLM stage takes them, sans-I/O: conversation items as chat
messages, function tools as chat-template specs, ``max_output_tokens`` as a token budget.
"""

from __future__ import annotations

import json
from typing import Any

from voicepipe.core.realtime.events import (
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    Item,
    MaxTokens,
    MessageItem,
)


def chat_message(item: Item) -> dict[str, Any] | None:
    """The chat message an item adds to the LLM's conversation (None: nothing to say: a
    message whose parts hold no text, e.g. audio without a transcript)."""
    if isinstance(item, MessageItem):
        text = " ".join(
            t.strip() for p in item.content for t in (p.text, p.transcript) if t and t.strip()
        )
        return {"role": item.role, "content": text} if text else None
    if isinstance(item, FunctionCallItem):
        try:
            args = json.loads(item.arguments or "{}")
        except json.JSONDecodeError:
            args = {}
        call = {"type": "function", "function": {"name": item.name, "arguments": args}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if isinstance(item, FunctionCallOutputItem):
        return {"role": "tool", "content": item.output}
    return None  # pragma: no cover (Item is exhaustive)


def tool_spec(tool: FunctionTool) -> dict[str, Any]:
    """A client's function tool as the chat template renders it (``tools=``)."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters or {"type": "object", "properties": {}},
        },
    }


def token_budget(max_tokens: MaxTokens) -> int:
    """``max_output_tokens`` as the LLM's ``max_new_tokens`` (0: the configured one)."""
    return 0 if max_tokens == "inf" else int(max_tokens)
