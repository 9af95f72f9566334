"""`voicepipe bench e2e --endpoint realtime|both`: the same spoken questions through
``/v1/realtime``, asked by the official ``openai`` SDK's realtime client.

The client streams each question at real time in 20 ms appends (as the ``/ws``
client sends 20 ms frames), followed by silence, and times one span:
``client.voice_to_first_audio``, from when it sent the last speech sample (the
``audio_end_ms`` of the server's ``speech_stopped``) to the arrival of the first
``response.output_audio.delta``. The ``/ws`` client records the same span before its
playout buffer, so ``--endpoint both`` (each question through ``/ws`` then
``/v1/realtime``, one server, alternating) compares the endpoints, not the clients'
buffers.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import numpy as np

from voicepipe.client import VOICE_TO_FIRST_AUDIO
from voicepipe.clock import now_ns

FRAME_MS = 20
TRAILING_S = 1.5  # as the /ws client: silence after the question
_RATE = 24000


async def ask(port: int, pcm: np.ndarray, *, timeout_s: float = 120.0) -> dict[str, Any]:
    """One spoken question (float32 mono at 24 kHz) in one realtime session."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key="bench", base_url=f"http://127.0.0.1:{port}/v1")
    pcm16 = (np.clip(pcm, -1, 1) * 32767).astype("<i2").tobytes()
    pcm16 += bytes(round(TRAILING_S * _RATE) * 2)
    step = _RATE * FRAME_MS // 1000 * 2
    out: dict[str, Any] = {"transcript": "", "reply_text": "", "status": None, "error": ""}
    first_audio_ns: int | None = None
    end_ms: int | None = None
    t0 = 0

    async def send(conn: Any) -> None:
        nonlocal t0
        t0 = now_ns()
        for k, i in enumerate(range(0, len(pcm16), step)):
            delay = (t0 + k * FRAME_MS * 1_000_000 - now_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            await conn.input_audio_buffer.append(
                audio=base64.b64encode(pcm16[i : i + step]).decode()
            )

    async with client.realtime.connect(model="voicepipe") as conn:
        created = await asyncio.wait_for(conn.recv(), timeout_s)
        assert created.type == "session.created", created.type
        sender = asyncio.create_task(send(conn))
        try:
            async with asyncio.timeout(timeout_s):
                async for ev in conn:
                    if ev.type == "response.output_audio.delta":
                        first_audio_ns = first_audio_ns or now_ns()
                    elif ev.type == "input_audio_buffer.speech_stopped" and end_ms is None:
                        end_ms = ev.audio_end_ms
                    elif ev.type == "conversation.item.input_audio_transcription.completed":
                        out["transcript"] = ev.transcript
                    elif ev.type == "response.output_audio_transcript.done":
                        out["reply_text"] = ev.transcript
                    elif ev.type == "error":
                        out["error"] = ev.error.message
                    elif ev.type == "response.done":
                        out["status"] = ev.response.status
                        break
        except TimeoutError:
            out["error"] = f"no response.done within {timeout_s:g} s"
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
    latency: dict[str, float] = {}
    if first_audio_ns is not None and end_ms is not None:
        latency[VOICE_TO_FIRST_AUDIO] = round((first_audio_ns - t0 - end_ms * 1_000_000) / 1e6, 1)
    out["latency_ms"] = latency
    out["ok"] = out["status"] == "completed" and bool(latency)
    return out


def endpoint_summary(sessions: list[dict[str, Any]], key: str = VOICE_TO_FIRST_AUDIO) -> dict:
    """Percentiles of ``key`` over the sessions that measured it."""
    from voicepipe.tracing import percentile

    values = [s["latency_ms"][key] for s in sessions if key in s.get("latency_ms", {})]
    pcts = (
        {q: round(percentile(values, p), 1) for q, p in (("p50", 50), ("p95", 95))}
        if values
        else {}
    )
    return {"n": len(values), "of": len(sessions), key: pcts}
