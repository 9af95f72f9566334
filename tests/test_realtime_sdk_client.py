"""The official ``openai`` SDK's realtime client against ``RealtimeSession`` over a real
loopback WebSocket.

This checks the protocol core from the client's side, through the SDK's own
``client.realtime.connect()`` path (URL, headers, its send/parse code): the tiny shell
below only moves text between the socket and the session, and plays the pipeline's part
with fixed outputs. It is a test of the protocol core only; the served endpoint, with
the pipeline's real outputs, is tests/e2e/test_realtime.py's.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest
from openai import AsyncOpenAI
from websockets.asyncio.server import ServerConnection, serve

from voicepipe.core.realtime import api as R

REPLY = "Hello there, how can I help?"
REPLY_PCM = (np.sin(np.arange(24000 * 3 // 10) / 8.0) * 8000).astype("<i2").tobytes()  # 300 ms


async def _shell(ws: ServerConnection, paths: list[str]) -> None:
    paths.append(ws.request.path if ws.request is not None else "")
    session = R.RealtimeSession(session_id="sess_loopback", instructions="Be brief.")

    async def run(outs: list[R.Out]) -> None:
        for o in outs:
            if isinstance(o, R.ServerEvent):
                await ws.send(R.encode_server_event(o))
            elif isinstance(o, R.CommitAudio):  # the ASR's final for the committed turn
                await run(session.transcript_done(o.item_id, "hello"))
            elif isinstance(o, R.StartResponse):  # the LLM + TTS, with fixed outputs
                await run(session.output_text(REPLY))
                await run(session.output_audio(REPLY_PCM, spoken_text=REPLY))
                await run(session.response_finished(usage=R.Usage(output_text_tokens=8)))

    await run(session.start())
    async for message in ws:
        await run(session.receive(message))


async def _until(conn: Any, kind: str) -> tuple[Any, list[Any]]:
    seen = []
    while True:
        ev = await conn.recv()
        seen.append(ev)
        if ev.type == kind:
            return ev, seen


@pytest.mark.timeout(60)
async def test_sdk_realtime_client_round_trip() -> None:
    paths: list[str] = []
    async with serve(lambda ws: _shell(ws, paths), "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        client = AsyncOpenAI(api_key="local", base_url=f"http://127.0.0.1:{port}/v1")
        async with client.realtime.connect(model="voicepipe") as conn:
            created = await conn.recv()
            assert created.type == "session.created"
            assert created.session.audio.input.format.rate == 24000

            await conn.session.update(
                session={
                    "type": "realtime",
                    "instructions": "Answer in French.",
                    "audio": {"input": {"turn_detection": None}},
                }
            )
            updated, _ = await _until(conn, "session.updated")
            assert updated.session.instructions == "Answer in French."
            assert updated.session.audio.input.turn_detection is None

            await conn.input_audio_buffer.append(
                audio=base64.b64encode(bytes(24000 * 2 // 5)).decode()
            )  # 200 ms
            await conn.input_audio_buffer.commit()
            done, seen = await _until(conn, "conversation.item.input_audio_transcription.completed")
            committed = next(e for e in seen if e.type == "input_audio_buffer.committed")
            assert done.item_id == committed.item_id and done.transcript == "hello"

            await conn.response.create()
            finished, seen = await _until(conn, "response.done")
            audio = b"".join(
                base64.b64decode(e.delta) for e in seen if e.type == "response.output_audio.delta"
            )
            transcript = "".join(
                e.delta for e in seen if e.type == "response.output_audio_transcript.delta"
            )
            assert audio == REPLY_PCM and transcript == REPLY
            assert finished.response.status == "completed"
            assert finished.response.usage.output_tokens == 8
            item = finished.response.output[0]
            assert item.content[0].transcript == REPLY

            # Barge-in after the fact: only 100 of the 300 ms were played.
            await conn.conversation.item.truncate(
                item_id=item.id, content_index=0, audio_end_ms=100
            )
            truncated, _ = await _until(conn, "conversation.item.truncated")
            assert truncated.audio_end_ms == 100
            await conn.conversation.item.retrieve(item_id=item.id)
            retrieved, _ = await _until(conn, "conversation.item.retrieved")
            heard = retrieved.item.content[0].transcript
            assert heard and REPLY.startswith(heard) and heard != REPLY

            # Bad input: error events of the API's shape, and the session goes on.
            await conn.send_raw("{not json")
            err, _ = await _until(conn, "error")
            assert err.error.code == "invalid_json"
            await conn.send_raw('{"type":"response.cancel","event_id":"c9"}')
            err, _ = await _until(conn, "error")
            assert (err.error.code, err.error.event_id) == ("response_cancel_not_active", "c9")
            await conn.conversation.item.delete(item_id=item.id)
            deleted, _ = await _until(conn, "conversation.item.deleted")
            assert deleted.item_id == item.id
    assert paths == ["/v1/realtime?model=voicepipe"]
