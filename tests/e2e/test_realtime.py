"""``/v1/realtime`` served for real: the official ``openai`` SDK's realtime client against
a running server (the assistant pipeline on the fast profile), spoken questions in
(the hibari teacher voices them), transcripts, spoken answers and events out.

Server VAD turns, manual commits with ``response.create``, text items and text-only
responses, barge-in (cancel + truncate onto what was heard), bad input answered with
``error`` events, and the bearer token. The client-tool round trip needs a chat
template that renders tools (the 1.5B default): ``test_realtime_tools.py``.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from openai import AsyncOpenAI
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.profile import FAST_TOML, fast
from voicepipe import config
from voicepipe.server.app import Server

CHUNK = 24000 * 2 // 10  # 100 ms of PCM16 at 24 kHz


def speech(text: str) -> bytes:
    from hibari import Hibari

    pcm = np.asarray(Hibari()(text, seed=1), np.float32)
    return (np.clip(pcm, -1, 1) * 32767).astype("<i2").tobytes()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    s = Server(fast(), pipeline="assistant", port=0)
    await s.start()
    try:
        yield s
    finally:
        await s.close()


def client(server: Server, key: str = "local") -> AsyncOpenAI:
    return AsyncOpenAI(api_key=key, base_url=f"http://127.0.0.1:{server.port}/v1")


async def send_audio(conn: Any, pcm: bytes, pace_s: float = 0.02) -> None:
    """``pcm`` in 100 ms appends, faster than real time (the VAD works on media time)."""
    for i in range(0, len(pcm), CHUNK):
        await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + CHUNK]).decode())
        await asyncio.sleep(pace_s)


async def until(conn: Any, kind: str, seen: list[Any] | None = None) -> Any:
    while True:
        ev = await asyncio.wait_for(conn.recv(), 120)
        if seen is not None:
            seen.append(ev)
        if ev.type == kind:
            return ev


def audio_of(events: list[Any]) -> bytes:
    return b"".join(
        base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta"
    )


@pytest.mark.timeout(240)
async def test_a_spoken_question_gets_a_transcript_and_a_spoken_answer(server: Server) -> None:
    question = speech("What is the capital of France?")
    async with client(server).realtime.connect(model="voicepipe") as conn:
        created = await until(conn, "session.created")
        assert created.session.audio.output.format.rate == 24000
        assert created.session.instructions  # the LLM's own system prompt
        sender = asyncio.create_task(send_audio(conn, question + bytes(24000 * 2 * 2)))
        seen: list[Any] = []
        done = await until(conn, "response.done", seen)
        await sender
    kinds = [e.type for e in seen]
    for k in (
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.input_audio_transcription.completed",
        "response.created",
    ):
        assert k in kinds, kinds
    assert kinds.index("input_audio_buffer.speech_stopped") < kinds.index("response.created")
    heard = next(e for e in seen if e.type.endswith("transcription.completed"))
    assert "capital" in heard.transcript.lower() and "france" in heard.transcript.lower()
    stopped = next(e for e in seen if e.type == "input_audio_buffer.speech_stopped")
    assert stopped.item_id == heard.item_id and stopped.audio_end_ms > 1000
    assert done.response.status == "completed", done.response
    said = "".join(e.delta for e in seen if e.type == "response.output_audio_transcript.delta")
    (item,) = done.response.output
    assert said.strip() and item.content[0].transcript == said
    assert len(audio_of(seen)) > 24000 * 2 // 2  # over half a second of reply speech
    assert done.response.usage.output_tokens > 0 and done.response.usage.input_tokens > 0


@pytest.mark.timeout(240)
async def test_manual_turns_commit_then_response_create(server: Server) -> None:
    question = speech("Tell me a fact about the moon.")
    async with client(server).realtime.connect(model="voicepipe") as conn:
        await until(conn, "session.created")
        await conn.session.update(
            session={
                "type": "realtime",
                "instructions": "You are a helpful assistant. Answer in one short sentence.",
                "audio": {"input": {"turn_detection": None}},
            }
        )
        updated = await until(conn, "session.updated")
        assert updated.session.audio.input.turn_detection is None
        await send_audio(conn, question + bytes(24000 * 2))
        seen: list[Any] = []
        await conn.input_audio_buffer.commit()
        await conn.response.create()  # before the transcript: held until it is final
        done = await until(conn, "response.done", seen)
    kinds = [e.type for e in seen]
    assert "input_audio_buffer.speech_started" not in kinds  # no VAD events in manual mode
    heard = next(e for e in seen if e.type.endswith("transcription.completed"))
    assert "moon" in heard.transcript.lower()
    committed = next(e for e in seen if e.type == "input_audio_buffer.committed")
    assert committed.item_id == heard.item_id
    assert done.response.status == "completed"
    assert len(audio_of(seen)) > 0


@pytest.mark.timeout(240)
async def test_text_items_and_a_text_only_response(server: Server) -> None:
    async with client(server).realtime.connect(model="voicepipe") as conn:
        await until(conn, "session.created")
        await conn.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Say the word hello."}],
            }
        )
        added = await until(conn, "conversation.item.added")
        assert added.item.content[0].text == "Say the word hello."
        seen: list[Any] = []
        await conn.response.create(response={"output_modalities": ["text"]})
        done = await until(conn, "response.done", seen)
    assert done.response.status == "completed"
    text = "".join(e.delta for e in seen if e.type == "response.output_text.delta")
    assert text.strip()
    assert not audio_of(seen)  # text only: no audio deltas


@pytest.mark.timeout(240)
async def test_barge_in_cancels_the_response_and_truncate_keeps_what_was_heard(
    server: Server,
) -> None:
    question = speech("Please tell me a long story about a dragon and a knight.")
    interruption = speech("Stop, that is enough.")
    async with client(server).realtime.connect(model="voicepipe") as conn:
        await until(conn, "session.created")
        seen: list[Any] = []
        await send_audio(conn, question + bytes(24000 * 2))
        await until(conn, "response.output_audio.delta", seen)
        # The user speaks over the reply as soon as it is heard.
        barge = asyncio.create_task(send_audio(conn, interruption + bytes(24000 * 2), 0.1))
        done = await until(conn, "response.done", seen)
        assert done.response.status == "cancelled"
        assert done.response.status_details.reason == "turn_detected"
        item = done.response.output[0]
        played_ms = len(audio_of(seen)) // 48 // 2  # the client played half of what came
        await conn.conversation.item.truncate(
            item_id=item.id, content_index=0, audio_end_ms=played_ms
        )
        truncated = await until(conn, "conversation.item.truncated", seen)
        assert truncated.audio_end_ms == played_ms
        await conn.conversation.item.retrieve(item_id=item.id)
        kept = (await until(conn, "conversation.item.retrieved")).item.content[0].transcript
        full = "".join(
            e.delta
            for e in seen
            if e.type == "response.output_audio_transcript.delta" and e.item_id == item.id
        )
        assert kept and full.startswith(kept) and len(kept) < len(full)
        await barge
        await until(conn, "response.done")  # the interruption gets its own answer


@pytest.mark.timeout(120)
async def test_bad_events_get_error_events_and_the_session_goes_on(server: Server) -> None:
    async with client(server).realtime.connect(model="voicepipe") as conn:
        await until(conn, "session.created")
        for raw, code in [
            ("{not json", "invalid_json"),
            ('{"type": "input_audio_buffer.append", "audio": "%%%"}', "invalid_value"),
            ('{"type": "no.such.event"}', "invalid_value"),
            ('{"type": "input_audio_buffer.commit"}', "input_audio_buffer_commit_empty"),
        ]:
            await conn.send_raw(raw)
            err = await until(conn, "error")
            assert err.error.code == code, (raw, err.error)
        await conn.session.update(session={"type": "realtime", "instructions": "Be brief."})
        assert (await until(conn, "session.updated")).session.instructions == "Be brief."


@pytest.mark.timeout(120)
async def test_the_bearer_token_is_required_when_configured() -> None:
    cfg = config.load(FAST_TOML, ["server.auth_token=s3cret"])
    s = Server(cfg, pipeline="assistant", port=0)
    await s.start()
    try:
        with pytest.raises(InvalidStatus) as refused:
            async with client(s, "wrong").realtime.connect(model="voicepipe") as conn:
                await conn.recv()
        assert refused.value.response.status_code == 403
        async with client(s, "s3cret").realtime.connect(model="voicepipe") as conn:
            assert (await conn.recv()).type == "session.created"
    finally:
        await s.close()


@pytest.mark.timeout(120)
async def test_a_full_server_refuses_with_an_error_event_and_1013() -> None:
    from websockets.asyncio.client import connect

    cfg = config.load(FAST_TOML, ["server.max_sessions=1"])
    s = Server(cfg, pipeline="loopback", port=0)
    await s.start()
    url = f"ws://127.0.0.1:{s.port}/v1/realtime"
    try:
        async with connect(url, proxy=None) as first:
            assert json.loads(await first.recv())["type"] == "session.created"
            async with connect(url, proxy=None) as second:
                err = json.loads(await second.recv())
                assert err["type"] == "error" and err["error"]["code"] == "too_many_sessions"
                with pytest.raises(ConnectionClosed):
                    await second.recv()
                assert second.close_code == 1013
    finally:
        await s.close()
