"""`voicepipe bench soak`: does a server that runs for a long time stay the same?

A `voicepipe serve` process runs the assistant on its default models while
``--sessions`` headless clients ask spoken questions back to back, one question
per session, for ``--minutes``. Every ``--sample-s`` seconds the server
process's resident memory (VmRSS) and open file descriptors are read from
/proc; every session's ``e2e.voice_to_voice`` is kept with the time it ended.

Reported (JSON): the samples; latency p50/p95/p99 per ``--window-min`` window;
RSS growth after warm-up (the first window), from the end of warm-up to the end
of the run and to the run's peak; open FDs at the start and the end; failed
sessions; and the p95 drift between the first and the last window. ``--plot``
draws RSS, FDs and latency against time (PNG).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from voicepipe.bench._progress import progress
from voicepipe.bench.common import QUESTIONS, speak


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "soak",
        help="RSS, open FDs and latency of a long-running server (JSON)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--minutes", type=float, default=30.0, help="how long to run (default 30)")
    p.add_argument("--sessions", type=int, default=2, help="clients talking at once (default 2)")
    p.add_argument("--sample-s", type=float, default=10.0, help="RSS/FD sampling period")
    p.add_argument("--window-min", type=float, default=5.0, help="latency window (minutes)")
    p.add_argument("--pipeline", default="assistant")
    p.add_argument("--plot", default=None, metavar="PNG", help="draw RSS, FDs and latency")
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.set_defaults(func=run)


def windows(
    latencies: list[tuple[float, float]], window_s: float, total_s: float
) -> list[dict[str, Any]]:
    """Latency percentiles per window: ``latencies`` holds (seconds since start, ms).
    Sessions that end after ``total_s`` (started before it) count in the last window,
    so no short window of stragglers stands at the end."""
    from voicepipe.tracing import percentile

    out = []
    start = 0.0
    last = max(0.0, total_s - window_s)
    while start < total_s - 1e-9:
        end = float("inf") if start >= last - 1e-9 else start + window_s
        vals = [ms for t, ms in latencies if start <= t < end]
        row: dict[str, Any] = {
            "from_s": round(start, 1),
            "to_s": round(start + window_s, 1),
            "sessions": len(vals),
        }
        if vals:
            row.update(
                {
                    q: round(percentile(vals, p), 1)
                    for q, p in (("p50", 50), ("p95", 95), ("p99", 99))
                }
            )
        out.append(row)
        start += window_s
    return out


def summarize(
    samples: list[dict[str, float]],
    latencies: list[tuple[float, float]],
    failed: int,
    window_s: float,
    total_s: float,
) -> dict[str, Any]:
    wins = windows(latencies, window_s, total_s)
    warm = [s for s in samples if s["t_s"] <= window_s] or samples[:1]
    after = [s for s in samples if s["t_s"] > window_s] or samples[-1:]
    rss_warm = warm[-1]["rss_mb"]
    full = [w for w in wins if "p95" in w]
    drift = None
    if len(full) >= 2:
        drift = round(full[-1]["p95"] / full[0]["p95"] - 1, 4)
    return {
        "rss_mb": {
            "start": samples[0]["rss_mb"],
            "after_warmup": rss_warm,
            "end": samples[-1]["rss_mb"],
            "peak_after_warmup": max(s["rss_mb"] for s in after),
            "growth_after_warmup": round(samples[-1]["rss_mb"] / rss_warm - 1, 4),
            "peak_growth_after_warmup": round(max(s["rss_mb"] for s in after) / rss_warm - 1, 4),
        },
        "open_fds": {
            "start": samples[0]["fds"],
            "end": samples[-1]["fds"],
            "max": max(s["fds"] for s in samples),
        },
        "sessions": len(latencies),
        "failed": failed,
        "windows": wins,
        "p95_drift_last_vs_first_window": drift,
    }


def plot(
    path: str,
    samples: list[dict[str, float]],
    latencies: list[tuple[float, float]],
    wins: list[dict[str, Any]],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    t = [s["t_s"] / 60 for s in samples]
    ax1.plot(t, [s["rss_mb"] for s in samples], label="server RSS (MB)")
    ax1.set_ylabel("RSS (MB)")
    fd = ax1.twinx()
    fd.plot(t, [s["fds"] for s in samples], color="tab:orange", label="open FDs")
    fd.set_ylabel("open FDs")
    ax1.set_title("voicepipe bench soak")
    ax2.scatter(
        [x / 60 for x, _ in latencies],
        [ms for _, ms in latencies],
        s=6,
        label="voice-to-voice (ms)",
    )
    for w in wins:
        if "p95" in w:
            ax2.hlines(w["p95"], w["from_s"] / 60, w["to_s"] / 60, colors="tab:red")
    ax2.set_xlabel("minutes")
    ax2.set_ylabel("voice-to-voice ms (red: window p95)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


async def soak(
    cfg: Any,
    *,
    minutes: float,
    n_sessions: int,
    sample_s: float,
    window_min: float,
    pipeline: str,
    log: Any,
) -> tuple[dict[str, Any], list, list]:
    import asyncio

    from voicepipe.bench._serve import serve_process
    from voicepipe.client import ClientSession

    clips = await asyncio.to_thread(speak, QUESTIONS)
    total_s = minutes * 60
    samples: list[dict[str, float]] = []
    latencies: list[tuple[float, float]] = []
    failed = 0
    log(f"bench soak: {minutes:g} min, {n_sessions} sessions at once; starting serve …")
    async with serve_process(pipeline, cfg) as srv:
        t0 = time.monotonic()
        deadline = t0 + total_s

        async def sampler() -> None:
            while True:
                samples.append(
                    {
                        "t_s": round(time.monotonic() - t0, 1),
                        "rss_mb": round(srv.rss_mb(), 1),
                        "fds": srv.open_fds(),
                    }
                )
                if time.monotonic() >= deadline:
                    return
                await asyncio.sleep(min(sample_s, max(0.0, deadline - time.monotonic())))

        async def talker(k: int) -> None:
            nonlocal failed
            i = k
            while time.monotonic() < deadline:
                clip = clips[i % len(clips)]
                res = await ClientSession(
                    srv.ws_url, clip, 16000, cfg, trailing_silence_s=1.5, timeout_s=120.0, index=i
                ).run()
                out = res.to_json()
                v2v = out["latency_ms"].get("e2e.voice_to_voice")
                if out["ok"] and v2v is not None:
                    latencies.append((time.monotonic() - t0, float(v2v)))
                else:
                    failed += 1
                    log(f"  session {i} failed: {out.get('error')}")
                i += n_sessions
                if len(latencies) % 20 == 0 and samples:
                    log(
                        f"  {(time.monotonic() - t0) / 60:.1f} min: {len(latencies)} sessions, "
                        f"RSS {samples[-1]['rss_mb']:.0f} MB, {samples[-1]['fds']} FDs"
                    )

        await asyncio.gather(sampler(), *(talker(k) for k in range(n_sessions)))
    out = summarize(samples, latencies, failed, window_min * 60, total_s)
    out.update(
        {
            "pipeline": pipeline,
            "minutes": round(minutes, 2),
            "concurrent_sessions": n_sessions,
            "samples": samples,
        }
    )
    return out, samples, latencies


def run(args: argparse.Namespace) -> int:
    import asyncio

    log = progress(args)

    out, samples, latencies = asyncio.run(
        soak(
            args.config,
            minutes=args.minutes,
            n_sessions=max(1, args.sessions),
            sample_s=args.sample_s,
            window_min=args.window_min,
            pipeline=args.pipeline,
            log=log,
        )
    )
    if args.plot:
        plot(args.plot, samples, latencies, out["windows"])
        out["plot"] = args.plot
    print(json.dumps(out, indent=None if args.json else 2))
    return 0 if out["sessions"] and not out["failed"] else 1
