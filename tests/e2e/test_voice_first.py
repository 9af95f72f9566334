"""Voice before text on a real server: chat completions keep the /v1 API busy while a
question is spoken (assistant, fast profile); the API yields while the voice turn is in
flight (its budget's pauses are counted), the spoken turn is answered, and the API's
requests are answered too (slowed, not refused)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.profile import fast
from voicepipe.audio import read_wav
from voicepipe.bench.e2e_api_load import chat_load
from voicepipe.client import ClientSession
from voicepipe.server.app import Server

CLIP = Path(__file__).resolve().parents[1] / "data" / "asr" / "utt11.wav"  # "Why is the sky blue?"


async def test_api_work_yields_to_a_voice_turn() -> None:
    cfg = fast()
    pcm, sr = read_wav(CLIP)
    server = Server(cfg, pipeline="assistant", port=0)
    await server.start()
    try:
        gate = server.openai.chat.voice_first
        assert gate is not None and gate.budget.share == cfg.server.api_share_while_voice
        async with chat_load("127.0.0.1", server.port, 2) as counts:
            res = await ClientSession(
                server.ws_url, pcm, sr, cfg, timeout_s=180, trailing_silence_s=1.5
            ).run()
            for _ in range(600):  # at most a minute for one answer after the turn
                if counts["ok"] or counts["failed"]:
                    break
                await asyncio.sleep(0.1)
        out = res.to_json()
        assert out["ok"] and "sky" in out["transcript"].lower(), out
        assert counts["failed"] == 0 and counts["ok"] >= 1
        assert counts["chunks"] >= counts["ok"]  # each answer streamed its text
        assert gate.pauses > 0  # the API did yield while the turn was in flight
        assert not server.voice_busy()
    finally:
        await server.close()
