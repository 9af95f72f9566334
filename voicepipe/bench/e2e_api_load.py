"""`bench e2e --api-load N`: spoken questions beside a chat-completions load.

Each batch of questions is asked twice of the same server: alone, then while ``N``
clients keep ``POST /v1/chat/completions`` busy (each sends its next request as soon as
its last one is answered). The summary compares voice to voice in the two, from the same
run and the same machine load: ``{"alone": {...}, "loaded": {...}, "ratio_p50": ...}``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from voicepipe.tracing import percentile

PROMPT = "Write three sentences about the history of the bicycle."
MAX_TOKENS = 64


@contextlib.asynccontextmanager
async def chat_load(host: str, port: int, n: int) -> AsyncIterator[dict[str, int]]:
    """``n`` clients asking the server's /v1 API in a loop while the block runs; the
    counts of requests answered (``ok``), refused or failed (``failed``), and of the text
    chunks streamed to them (``chunks``: the API's progress, which a request slowed past
    the block's end would not show in ``ok``)."""
    from openai import AsyncOpenAI

    counts = {"ok": 0, "failed": 0, "chunks": 0}
    client = AsyncOpenAI(base_url=f"http://{host}:{port}/v1", api_key="none", max_retries=0)
    model = (await client.models.list()).data[0].id  # the one model the server serves

    async def one() -> None:
        while True:
            try:
                stream = await client.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": PROMPT}],
                    max_tokens=MAX_TOKENS,
                    timeout=600,
                    stream=True,
                )
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        counts["chunks"] += 1
                counts["ok"] += 1
            except asyncio.CancelledError:
                raise
            except Exception:
                counts["failed"] += 1
                await asyncio.sleep(0.5)

    tasks = [asyncio.create_task(one()) for _ in range(n)]
    await asyncio.sleep(1.0)  # the load is running before the question is asked
    try:
        yield counts
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()


def split_summary(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """Voice to voice of the sessions asked alone against those asked under load."""
    out: dict[str, Any] = {}
    for key, loaded in (("alone", False), ("loaded", True)):
        v = [
            s["latency_ms"]["e2e.voice_to_voice"]
            for s in sessions
            if bool(s.get("api_load")) == loaded and "e2e.voice_to_voice" in s["latency_ms"]
        ]
        out[key] = {
            "n": len(v),
            "p50": round(percentile(v, 50), 1) if v else None,
            "p95": round(percentile(v, 95), 1) if v else None,
        }
    a, b = out["alone"]["p50"], out["loaded"]["p50"]
    out["ratio_p50"] = round(b / a, 3) if a and b else None
    done = [s["api_requests"] for s in sessions if s.get("api_load")]
    out["api_requests_answered"] = sum(d["ok"] for d in done)
    out["api_requests_failed"] = sum(d["failed"] for d in done)
    out["api_chunks_streamed"] = sum(d.get("chunks", 0) for d in done)
    return out
