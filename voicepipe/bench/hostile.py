"""`voicepipe bench hostile`: what hostile clients cost an honest session.

A `voicepipe serve` process runs the assistant on its default models. Each
spoken question is asked twice in a row by an honest headless client: once
alone, once while a burst of hostile clients strikes the same server (sockets
that never say hello, 300 rapid connect/close cycles, garbage and 10 MB frames,
absurd playback reports, a client that never reads, clients that vanish
mid-stream). Alone and under attack alternate, so both see the same machine
load. Reported (JSON): voice-to-voice p50/p95 of each, their ratio, how every
hostile connection was closed, and whether every honest session kept its
transcript and reply.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from collections import Counter
from typing import Any

import numpy as np

from voicepipe.bench.e2e import QUESTIONS, _pcts, speak


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "hostile",
        help="an honest session's latency alone vs under attack (JSON)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--questions", type=int, default=len(QUESTIONS))
    p.add_argument("--rounds", type=int, default=1, help="ask every question N times each way")
    p.add_argument("--pipeline", default="assistant")
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.set_defaults(func=run)


async def _ws(url: str, **kw: Any) -> Any:
    from websockets.asyncio.client import connect

    return await connect(
        url, compression=None, proxy=None, close_timeout=1, open_timeout=10, max_size=None, **kw
    )


async def _hello(url: str, **kw: Any) -> Any:
    from voicepipe.core import protocol as P

    ws = await _ws(url, **kw)
    await ws.send(P.encode_message(P.Hello(sample_rate=16000)))
    await ws.recv()
    return ws


async def _closed(ws: Any, timeout: float = 15) -> str:
    from websockets.exceptions import ConnectionClosed

    try:
        async with asyncio.timeout(timeout):
            async for _ in ws:
                pass
    except (ConnectionClosed, TimeoutError):
        pass
    if ws.close_code is None:
        await ws.close()
    return str(ws.close_code)


async def attack(url: str, stop: asyncio.Event) -> Counter[str]:
    """One burst of hostile clients until ``stop``; how each connection ended."""
    from voicepipe.core import protocol as P

    outcomes: Counter[str] = Counter()

    async def idle() -> None:  # 8 sockets that never say hello
        socks = [await _ws(url) for _ in range(8)]
        for code in await asyncio.gather(*(_closed(s) for s in socks)):
            outcomes[f"idle:{code}"] += 1

    async def churn() -> None:  # the tester's 300 rapid connect/close cycles
        for _ in range(300):
            if stop.is_set():
                break
            ws = await _ws(url)
            await ws.close()
            outcomes["churn"] += 1

    async def garbage() -> None:
        for data in (
            b"\x01\x01junk",
            '{"type":"hello","sample_rate":"loud"}',
            bytes(10 * 1024 * 1024),
        ):
            ws = await _hello(url)
            await ws.send(data)
            outcomes[f"garbage:{await _closed(ws)}"] += 1

    async def absurd_playback() -> None:
        ws = await _hello(url)
        await ws.send(
            json.dumps(
                {
                    "type": "playback",
                    "turn_id": 1,
                    "played_samples": 0,
                    "sample_rate": 16000,
                    "first_play_ms": -1.7e308,
                    "now_ms": 1.7e308,
                }
            )
        )
        outcomes[f"playback:{await _closed(ws)}"] += 1

    async def never_reads() -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        ws = await _hello(url, sock=sock, max_queue=1)
        pcm = np.zeros(320, np.int16)
        for seq in range(100):  # speech-free audio: keeps the socket busy, never reads
            await ws.send(
                P.encode_audio(
                    P.AudioFrame(kind=P.KIND_AUDIO_IN, seq=seq, media_ts=seq * 320, pcm=pcm)
                )
            )
            await asyncio.sleep(0.02)
        ws.transport.abort()
        outcomes["never_reads"] += 1

    async def vanish() -> None:
        ws = await _hello(url)
        ws.transport.abort()
        outcomes["vanish"] += 1

    tasks = [churn(), idle(), garbage(), absurd_playback(), never_reads(), vanish()]
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            outcomes[f"client_error:{type(r).__name__}"] += 1
    return outcomes


async def _ask(
    srv: Any, cfg: Any, clip: Any, text: str, under_attack: bool, closes: Counter[str]
) -> dict[str, Any]:
    from voicepipe.client import ClientSession

    stop = asyncio.Event()
    burst = asyncio.create_task(attack(srv.ws_url, stop)) if under_attack else None
    res = await ClientSession(
        srv.ws_url, clip, 16000, cfg, trailing_silence_s=1.5, timeout_s=120.0
    ).run()
    if burst is not None:
        stop.set()
        closes.update(await burst)
    out = res.to_json()
    return {
        "question": text,
        "ok": out["ok"],
        "transcript": out["transcript"],
        "reply_text": out["reply_text"],
        "voice_to_voice_ms": out["latency_ms"].get("e2e.voice_to_voice"),
    }


async def bench(
    cfg: Any, *, pipeline: str, n_questions: int, rounds: int, log: Any
) -> dict[str, Any]:
    from voicepipe.bench._serve import serve_process

    texts = QUESTIONS[: max(1, min(n_questions, len(QUESTIONS)))]
    clips = await asyncio.to_thread(speak, texts)
    runs: dict[str, list[dict[str, Any]]] = {"alone": [], "under_attack": []}
    closes: Counter[str] = Counter()
    async with serve_process(pipeline, cfg) as srv:
        for _ in range(rounds):
            for clip, text in zip(clips, texts, strict=True):
                for name in runs:
                    r = await _ask(srv, cfg, clip, text, name == "under_attack", closes)
                    runs[name].append(r)
                    log(f"  {name}: v2v={r['voice_to_voice_ms']} ms {r['reply_text'][:50]!r}")
    out: dict[str, Any] = {"pipeline": pipeline, "questions": len(texts), "rounds": rounds}
    for name, rs in runs.items():
        v2v = [r["voice_to_voice_ms"] for r in rs if r["voice_to_voice_ms"] is not None]
        out[name] = {"voice_to_voice_ms": _pcts(v2v), "failed": sum(not r["ok"] for r in rs)}
    alone, hit = out["alone"]["voice_to_voice_ms"], out["under_attack"]["voice_to_voice_ms"]
    out["ratio_under_attack"] = {
        q: round(hit[q] / alone[q], 3) for q in ("p50", "p95") if q in alone and q in hit
    }
    # The honest client heard the same thing both ways (same transcript and reply).
    pairs = zip(runs["alone"], runs["under_attack"], strict=True)
    out["same_transcript_and_reply"] = sum(
        a["transcript"] == b["transcript"] and a["reply_text"] == b["reply_text"] for a, b in pairs
    )
    out["hostile_closes"] = dict(sorted(closes.items()))
    out["turns"] = runs
    return out


def run(args: argparse.Namespace) -> int:
    def log(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    out = asyncio.run(
        bench(
            args.config,
            pipeline=args.pipeline,
            n_questions=args.questions,
            rounds=max(1, args.rounds),
            log=log,
        )
    )
    print(json.dumps(out, indent=None if args.json else 2))
    return 0 if not out["alone"]["failed"] and not out["under_attack"]["failed"] else 1
