"""``/v1/realtime`` fuzzed through real sockets: random client events (real event types
with random field values, unknown types, garbage text and binary, audio appends), then a
valid ``session.update``. The API never drops a session for bad input: each session
must still answer ``session.updated`` after the garbage, with ``error`` events of the
API's shape on the way, and the server must stay up with no session left behind.

The server runs the loopback pipeline (no models: the protocol shell is under test;
tests/e2e/test_realtime.py drives the assistant pipeline with the SDK).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.asyncio.client import connect

from tests.e2e.test_fuzz_server import FUZZ, Running, _json_values
from voicepipe.core.realtime.api import CLIENT_EVENT_TYPES

FIELDS = ["event_id", "session", "item", "item_id", "previous_item_id", "audio",
          "content_index", "audio_end_ms", "response", "response_id"]  # fmt: skip


@pytest.fixture(scope="module")
def running() -> Iterator[Running]:
    r = Running()
    yield r
    r.stop()


@st.composite
def _message(draw: st.DrawFn) -> str | bytes:
    kind = draw(st.sampled_from(["event", "event", "audio", "text", "binary"]))
    if kind == "event":
        obj = {k: draw(_json_values) for k in draw(st.lists(st.sampled_from(FIELDS), unique=True))}
        obj["type"] = draw(st.sampled_from([*sorted(CLIENT_EVENT_TYPES), "bogus.event"]))
        return json.dumps(obj)
    if kind == "audio":
        pcm = draw(st.binary(max_size=960))
        return json.dumps(
            {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}
        )
    if kind == "text":
        return draw(st.text(max_size=200))
    return draw(st.binary(max_size=100))


async def _drive(url: str, messages: list[str | bytes]) -> list[dict]:
    """Send the messages and a valid session.update; every event until session.updated."""
    async with connect(url, compression=None, proxy=None, close_timeout=2) as ws:
        first = json.loads(await ws.recv())
        assert first["type"] == "session.created", first
        for m in messages:
            await ws.send(m)
        update = {"type": "session.update", "session": {"type": "realtime", "instructions": "ok"}}
        await ws.send(json.dumps(update))
        seen = []
        while True:
            ev = json.loads(await ws.recv())
            seen.append(ev)
            if ev["type"] == "session.updated" and ev["session"]["instructions"] == "ok":
                return seen


@FUZZ
@given(st.lists(_message(), max_size=12))
def test_garbage_never_drops_a_realtime_session(
    running: Running, messages: list[str | bytes]
) -> None:
    url = f"ws://127.0.0.1:{running.server.port}/v1/realtime"
    seen = running.call(_drive(url, messages))
    for ev in seen:
        if ev["type"] == "error":
            err = ev["error"]
            assert err["type"] and err["code"] and err["message"], ev


def test_no_realtime_session_is_left_behind(running: Running) -> None:
    running.call(_drive(f"ws://127.0.0.1:{running.server.port}/v1/realtime", ["{bad"]))

    async def closed() -> None:  # the server's side of the close may still be running
        await asyncio.wait_for(running.server._no_sessions.wait(), 10)

    running.call(closed())
    assert running.server.admission.sessions == 0
    assert not running.server.sessions
