"""`voicepipe bench hostile`: what hostile clients cost an honest session.

A `voicepipe serve` process runs the assistant on its default models. Each
spoken question is asked twice in a row by an honest headless client: once
alone, once while a burst of hostile clients strikes the same server (sockets
that never say hello, 300 rapid connect/close cycles, garbage and 10 MB frames,
absurd playback reports, a client that never reads, a client that vanishes, a
slowloris upgrade). Alone and under attack alternate, so both see the same
machine load; one unmeasured question warms the server first. Reported
(JSON): voice-to-voice p50/p95 of each, their ratio, the server's CPU seconds
per question, how every hostile connection was closed, whether every honest
session kept its transcript and reply, and the load average at start and end.

Three processes, as in real use: the server, the honest client (this one: its
event loop measures voice-to-voice and does nothing else), and the attackers
(voicepipe/bench/attackers.py, the same attacks the hostile tests make) at
nice 19. A real attacker runs on another machine; on this one its CPU still
comes from the server's cores, at the lowest priority (``attackers`` in the
JSON says so).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from voicepipe.bench import attackers as attackers_mod
from voicepipe.bench._progress import progress
from voicepipe.bench.common import QUESTIONS, pcts, speak


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


@asynccontextmanager
async def attacker_process(url: str) -> AsyncIterator[Any]:
    """The attackers in a process of their own at nice 19 (voicepipe/bench/attackers.py)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "voicepipe.bench.attackers",
        url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
        if line.strip() != b"ready":
            raise RuntimeError(f"attacker process did not start (printed {line!r})")
        yield proc
    finally:
        if proc.returncode is None:
            proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()


async def _ask(
    srv: Any, cfg: Any, clip: Any, text: str, attackers: Any, closes: Counter[str]
) -> dict[str, Any]:
    from voicepipe.client import ClientSession

    if attackers is not None:  # the burst starts as the honest client connects
        attackers.stdin.write(b"go\n")
        await attackers.stdin.drain()
    cpu0 = srv.cpu_s()
    # 300 s past the question: the longest replies (~1 min of speech, played at real
    # time) outlived 120 s on a loaded machine, a timeout that measured nothing.
    res = await ClientSession(
        srv.ws_url, clip, 16000, cfg, trailing_silence_s=1.5, timeout_s=300.0
    ).run()
    cpu = srv.cpu_s() - cpu0
    if attackers is not None:
        attackers.stdin.write(b"stop\n")
        await attackers.stdin.drain()
        # Returns once every hostile connection ended (idle ones at the hello deadline),
        # so the next solo question starts on a quiet server.
        closes.update(json.loads(await asyncio.wait_for(attackers.stdout.readline(), 120)))
    out = res.to_json()
    return {
        "question": text,
        "ok": out["ok"],
        "transcript": out["transcript"],
        "reply_text": out["reply_text"],
        "voice_to_voice_ms": out["latency_ms"].get("e2e.voice_to_voice"),
        "server_cpu_s": round(cpu, 2),
        # Every span the session reported (asr, llm.ttft, tts.ttfa, …): where time went.
        "spans_ms": {k: round(v, 1) for k, v in sorted(out["latency_ms"].items())},
    }


async def bench(
    cfg: Any, *, pipeline: str, n_questions: int, rounds: int, log: Any
) -> dict[str, Any]:
    from voicepipe.bench._serve import serve_process

    load0 = [round(x, 2) for x in os.getloadavg()]
    texts = QUESTIONS[: max(1, min(n_questions, len(QUESTIONS)))]
    clips = await asyncio.to_thread(speak, texts)
    runs: dict[str, list[dict[str, Any]]] = {"alone": [], "under_attack": []}
    closes: Counter[str] = Counter()
    async with serve_process(pipeline, cfg) as srv, attacker_process(srv.ws_url) as atk:
        # One unmeasured question first: the server's first session pays one-off costs
        # (fresh worker threads, first allocations) that would flatter the ratio.
        await _ask(srv, cfg, clips[0], texts[0], None, closes)
        for _ in range(rounds):
            for clip, text in zip(clips, texts, strict=True):
                for name in runs:
                    r = await _ask(
                        srv, cfg, clip, text, atk if name == "under_attack" else None, closes
                    )
                    runs[name].append(r)
                    log(f"  {name}: v2v={r['voice_to_voice_ms']} ms {r['reply_text'][:50]!r}")
    out: dict[str, Any] = {
        "pipeline": pipeline,
        "questions": len(texts),
        "rounds": rounds,
        "attackers": {
            "process": "separate",  # never the honest client's process or event loop
            "nice": attackers_mod.NICE,
            "same_machine": True,  # loopback: their CPU is still the server's two cores
        },
        "loadavg_start": load0,  # 1, 5, 15 min: the machine is often shared
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
    }
    for name, rs in runs.items():
        v2v = [r["voice_to_voice_ms"] for r in rs if r["voice_to_voice_ms"] is not None]
        out[name] = {
            "voice_to_voice_ms": pcts(v2v),
            "failed": sum(not r["ok"] for r in rs),
            "server_cpu_s_mean": round(sum(r["server_cpu_s"] for r in rs) / len(rs), 2),
        }
    spans = sorted(set.intersection(*(set(r["spans_ms"]) for rs in runs.values() for r in rs)))
    out["span_p50_ms"] = {  # alone vs under attack, per stage
        k: {name: pcts([r["spans_ms"][k] for r in rs])["p50"] for name, rs in runs.items()}
        for k in spans
    }
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
    log = progress(args)

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
