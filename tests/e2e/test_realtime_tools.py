"""A client tool over ``/v1/realtime`` with the default 1.5B (its chat template renders
tools; the fast profile's does not): the model's call comes back as function-call
events and ends the response; the client's output, sent back as a
``function_call_output`` item, is what the next response answers from.

Loads the 1.5B: ``pytest -m slow``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.e2e.test_realtime import client, until
from voicepipe import config
from voicepipe.server.app import Server

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "the city's name"}},
        "required": ["city"],
    },
}


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    cfg = config.load(None, ["llm.model=qwen2.5-coder-1.5b", "llm.max_new_tokens=60"])
    s = Server(cfg, pipeline="assistant", port=0)
    await s.start()
    try:
        yield s
    finally:
        await s.close()


@pytest.mark.timeout(600)
async def test_a_client_tool_is_called_and_its_output_answered(server: Server) -> None:
    async with client(server).realtime.connect(model="voicepipe") as conn:
        created = await until(conn, "session.created")
        # the LLM's effective prompt (tools on: the tools prompt), not the configured one
        assert created.session.instructions == server.cfg.tools.system_prompt
        await conn.session.update(
            session={
                "type": "realtime",
                "instructions": "You are a voice assistant. Call get_weather when asked about "
                "the weather, then say the result briefly.",
                "tools": [WEATHER],
                "output_modalities": ["text"],
            }
        )
        await until(conn, "session.updated")
        await conn.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "What is the weather in Paris?"}],
            }
        )
        seen: list[Any] = []
        await conn.response.create()
        done = await until(conn, "response.done", seen)
        assert done.response.status == "completed"
        calls = [o for o in done.response.output if o.type == "function_call"]
        assert [c.name for c in calls] == ["get_weather"], done.response.output
        assert json.loads(calls[0].arguments)["city"].lower() == "paris"
        args = "".join(e.delta for e in seen if e.type == "response.function_call_arguments.delta")
        assert json.loads(args) == json.loads(calls[0].arguments)

        await conn.conversation.item.create(
            item={
                "type": "function_call_output",
                "call_id": calls[0].call_id,
                "output": json.dumps({"city": "Paris", "sky": "sunny", "celsius": 31}),
            }
        )
        seen = []
        await conn.response.create()
        done = await until(conn, "response.done", seen)
    text = "".join(e.delta for e in seen if e.type == "response.output_text.delta")
    assert done.response.status == "completed"
    assert "31" in text or "thirty" in text.lower() or "sunny" in text.lower(), text
