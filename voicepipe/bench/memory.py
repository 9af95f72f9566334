"""`voicepipe bench memory`: the server's resident memory across sequential sessions.

A `voicepipe serve` process runs the pipeline on its default models; the
headless client asks one short spoken question per session, one session after
another, and after each one (once the server's /metrics count its teardown,
allocator trim included, as done) the server's RSS is read from
``/proc/<pid>/status``. A server that releases what a finished session held
levels off after a few sessions (models loaded, kernel and shape caches warm,
the worker threads all started); one that keeps something per session grows by
that much with every session.

Questions are spoken by the teacher voice (hibari) at run time, as in
``bench e2e``. ``growth_mb`` is RSS after the last session minus RSS after the
third (the first ones warm caches up); ``per_session_mb`` spreads it over the
sessions in between. The allocator's own settings come from the environment
the command runs in (e.g. ``MALLOC_ARENA_MAX=2 voicepipe bench memory``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from voicepipe.bench._progress import progress
from voicepipe.cli import add_config_arg

QUESTIONS = [
    "Hello.",
    "What is two plus three?",
    "Why is the sky blue?",
    "Turn on the lights.",
]
BASELINE = 3  # sessions that warm caches up before growth is counted


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "memory",
        help="server RSS after each of N sequential sessions (JSON)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_arg(p)
    p.add_argument("--sessions", type=int, default=25, help="sequential sessions (≥ 4)")
    p.add_argument("--pipeline", default="assistant")
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.set_defaults(func=run)


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


async def _torn_down(host: str, port: int, n: int, timeout_s: float = 30.0) -> None:
    """Wait until the server has finished tearing down ``n`` sessions: its /metrics count
    the allocator trims that end each session's teardown (server/app.py)."""
    import asyncio
    import re
    import time
    import urllib.request

    url = f"http://{host}:{port}/metrics"
    deadline = time.monotonic() + timeout_s
    while True:
        body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
        m = re.search(rb"^voicepipe_memory_trims_total (\S+)$", body, re.M)
        if m and float(m.group(1)) >= n:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}: session {n} is not torn down")
        await asyncio.sleep(0.05)


async def sessions_rss(
    clips: list[tuple[Any, int]],
    cfg: Any,
    n: int,
    pipeline: str = "assistant",
    log: Any = None,
    speed: float = 1.0,
) -> dict[str, Any]:
    """``n`` sequential sessions against one `voicepipe serve` process, one clip each (in
    turn, streamed at ``speed`` × real time); the server's RSS after every session and a
    summary. Raises if a session fails."""
    from voicepipe.bench._serve import serve_process
    from voicepipe.client import ClientSession

    if n <= BASELINE:
        raise ValueError(f"need more than {BASELINE} sessions")
    rss: list[float] = []
    replies: list[str] = []
    async with serve_process(pipeline, cfg) as srv:
        pid = srv.proc.pid
        start = srv.rss_mb()
        for i in range(n):
            pcm, sr = clips[i % len(clips)]
            res = await ClientSession(
                srv.ws_url,
                pcm,
                sr,
                cfg,
                speed=speed,
                trailing_silence_s=1.0,
                timeout_s=120.0,
                index=i,
            ).run()
            out = res.to_json()
            if not out["ok"]:
                raise RuntimeError(f"session {i} failed: {out}")
            await _torn_down(srv.host, srv.port, i + 1)
            rss.append(round(srv.rss_mb(), 1))
            replies.append(" / ".join(t["reply_text"] for t in out["turns"] if t["reply_text"]))
            if log:
                log(f"session {i + 1}/{n}: RSS {rss[-1]:.0f} MiB")
        n_threads = threads(pid)
    base = rss[BASELINE - 1]
    growth = rss[-1] - base
    return {
        "pipeline": pipeline,
        "sessions": n,
        "rss_start_mb": round(start, 1),
        "rss_mb": rss,
        f"rss_after_{BASELINE}_mb": base,
        "rss_last_mb": rss[-1],
        "rss_max_mb": max(rss),
        "growth_mb": round(growth, 1),
        "per_session_mb": round(growth / (n - BASELINE), 2),
        "server_threads": n_threads,
        "replies": replies,
    }


def run(args: argparse.Namespace) -> int:
    import asyncio
    import os

    from voicepipe.bench.common import speak

    log = progress(args)

    clips = [(pcm, 16000) for pcm in speak(QUESTIONS)]
    out = asyncio.run(
        sessions_rss(clips, args.config, max(args.sessions, BASELINE + 1), args.pipeline, log)
    )
    out["malloc_env"] = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    print(json.dumps(out, indent=None if args.json else 2))
    return 0
