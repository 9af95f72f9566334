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
    p.add_argument(
        "--concurrent",
        type=int,
        default=0,
        metavar="N",
        help="then, on the same server, 1, 2, … N sessions at once: peak RSS and the "
        "server's CPU seconds per question at each (what a replica costs per session)",
    )
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


async def _ask(srv: Any, clip: tuple[Any, int], cfg: Any, speed: float, i: int) -> dict[str, Any]:
    """One session, one question; its result (raises if it failed)."""
    from voicepipe.client import ClientSession

    pcm, sr = clip
    res = await ClientSession(
        srv.ws_url, pcm, sr, cfg, speed=speed, trailing_silence_s=1.0, timeout_s=120.0, index=i
    ).run()
    out: dict[str, Any] = res.to_json()
    if not out["ok"]:
        raise RuntimeError(f"session {i} failed: {out}")
    return out


async def concurrent_cost(
    srv: Any, clips: list[tuple[Any, int]], cfg: Any, most: int, speed: float, log: Any
) -> list[dict[str, Any]]:
    """1, 2, … ``most`` sessions at once, one question each: the server's peak RSS while
    they run (sampled every 0.1 s) and its CPU seconds (user + system) per question."""
    import asyncio

    async def peak_while(work: Any) -> float:
        """The server's highest RSS while ``work`` runs."""
        task = asyncio.ensure_future(work)
        peak = srv.rss_mb()
        while not task.done():
            peak = max(peak, srv.rss_mb())
            await asyncio.wait([task], timeout=0.1)
        await task  # (its exception, if any)
        return peak

    out = []
    for k in range(1, most + 1):
        cpu0 = srv.cpu_s()
        asks = [_ask(srv, clips[i % len(clips)], cfg, speed, i) for i in range(k)]
        peak = await peak_while(asyncio.gather(*asks))
        cpu = srv.cpu_s() - cpu0
        out.append(
            {"sessions": k, "rss_peak_mb": round(peak, 1), "cpu_s_per_question": round(cpu / k, 2)}
        )
        if log:
            log(f"{k} at once: peak RSS {peak:.0f} MiB, {cpu / k:.1f} CPU s a question")
    return out


async def sessions_rss(
    clips: list[tuple[Any, int]],
    cfg: Any,
    n: int,
    pipeline: str = "assistant",
    log: Any = None,
    speed: float = 1.0,
    concurrent: int = 0,
) -> dict[str, Any]:
    """``n`` sequential sessions against one `voicepipe serve` process, one clip each (in
    turn, streamed at ``speed`` × real time); the server's RSS after every session and a
    summary; with ``concurrent``, then ``concurrent_cost`` on the same server. Raises if
    a session fails."""
    from voicepipe.bench._serve import serve_process

    if n <= BASELINE:
        raise ValueError(f"need more than {BASELINE} sessions")
    rss: list[float] = []
    replies: list[str] = []
    async with serve_process(pipeline, cfg) as srv:
        pid = srv.proc.pid
        start = srv.rss_mb()
        for i in range(n):
            out = await _ask(srv, clips[i % len(clips)], cfg, speed, i)
            await _torn_down(srv.host, srv.port, i + 1)
            rss.append(round(srv.rss_mb(), 1))
            replies.append(" / ".join(t["reply_text"] for t in out["turns"] if t["reply_text"]))
            if log:
                log(f"session {i + 1}/{n}: RSS {rss[-1]:.0f} MiB")
        n_threads = threads(pid)
        at_once = await concurrent_cost(srv, clips, cfg, concurrent, speed, log)
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
        "concurrent": at_once,
    }


def run(args: argparse.Namespace) -> int:
    import asyncio
    import os

    from voicepipe.bench.common import speak

    log = progress(args)

    clips = [(pcm, 16000) for pcm in speak(QUESTIONS)]
    out = asyncio.run(
        sessions_rss(
            clips,
            args.config,
            max(args.sessions, BASELINE + 1),
            args.pipeline,
            log,
            concurrent=max(0, args.concurrent),
        )
    )
    out["malloc_env"] = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    print(json.dumps(out, indent=None if args.json else 2))
    return 0
