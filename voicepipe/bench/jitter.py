"""`voicepipe bench jitter`: playout under network faults, real sockets and simulated.

Real path: a `voicepipe serve --pipeline loopback` process ↔ the fault-injecting
TCP proxy (``voicepipe.netsim``, faults on the server → client direction) ↔ the
headless client with the adaptive playout buffer; the client sends speech 1.15×
faster than real time so the server's pacer times the reply. The client's
counters are sampled every 20 ms. Simulated path: the same echo (frames produced
as the output stage's resampler releases them from input arriving 1.15× faster
than real time), the same pacer schedule and fault schedule, replayed through the
same buffer (no sockets, no scheduler). Scenario "clean" (no faults) shows the machine's own
scheduling noise on the real path.

Metrics (all from the playout buffer's counters):
* ``underruns``: times the buffer ran dry mid-reply.
* ``concealed_pct``: concealed ms / played ms (played = reply media played).
* ``delay_ms_mean`` / ``delay_ms_p95``: the buffer's current delay D — what it
  adds on top of the fastest network path — sampled from 1 s after playout
  starts until the reply's audio is all received.
* ``recovery_ms``: per stall, from the stall's end to the first sample where
  |D − target| ≤ 20 ms (None: never, while the reply lasted).
* ``proxy_late_ms_max`` (real path): how far behind its fault schedule the proxy
  forwarded a chunk, i.e. this machine's scheduling lag (the proxy shares the
  client's event loop); tens of ms or more means the real row measures load too.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from voicepipe.cli import add_config_arg

SCENARIOS = {
    # no faults at all: on real sockets, what is left is this machine's own scheduling noise
    "clean": dict(),
    "jitter_40pm20": dict(delay_ms=40.0, jitter_ms=20.0),
    "stall_250_every_5s": dict(delay_ms=40.0, jitter_ms=20.0, stall_ms=250.0, stall_every_s=5.0),
}
TOL_MS = 20.0
# Input a little faster than real time: after the first ~0.4 s the echo is produced ahead
# of its schedule, so the server's pacer (not the client's send loop) times the reply, as
# for a real reply. Not much faster: the input backlog queues in front of the client's
# keepalive pings, and beyond ~20 s of backlog websockets closes the connection.
SPEED = 1.15


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "jitter",
        help="playout buffer under delay/jitter/stalls (real sockets + simulated)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_arg(p)
    p.add_argument("--seconds", type=float, default=60.0, help="speech streamed per scenario")
    p.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        help="run only this scenario (repeatable; default: all)",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the injected jitter")
    p.add_argument("--no-real", action="store_true", help="simulated traces only")
    p.add_argument("--json", action="store_true", help="print JSON (default: a table)")
    p.set_defaults(func=run)


def speech(seconds: float, sr: int = 16000) -> Any:
    """Real speech from the hibari teacher TTS, sentences with natural pauses."""
    import numpy as np
    from hibari.tts import Hibari

    from voicepipe.audio import resample

    lines = [
        "The buffer has to hide the network from the listener.",
        "When packets arrive late, it stretches the speech a little.",
        "When they arrive in a burst, it plays them a little faster.",
        "A stall on the connection is the hardest case of all.",
        "Nothing that arrives is thrown away, and nothing is played twice.",
    ]
    tts = Hibari()
    parts, total, i = [], 0, 0
    while total < seconds * sr:
        wav = resample(np.asarray(tts(lines[i % len(lines)], seed=i), np.float32), 24000, sr)
        parts += [wav, np.zeros(sr // 4, np.float32)]
        total += len(wav) + sr // 4
        i += 1
    return np.concatenate(parts)[: int(seconds * sr)], sr


def summarize(
    series: list[tuple[int, float, float, float, float]],
    stalls: list[tuple[int, int]],
    stats: dict[str, float],
    t_start: int | None,
    t_stop: int,
) -> dict[str, Any]:
    """``series`` rows: (t_ns, delay_ms, target_ms, concealed_ms, played_ms)."""
    import numpy as np

    t0 = (t_start or 0) + 1_000_000_000
    d = np.array([r[1] for r in series if t0 <= r[0] <= t_stop] or [0.0])
    rec = []
    for _, end in stalls:
        if t_start is None or end > t_stop:
            continue
        hit = next((r[0] for r in series if r[0] >= end and abs(r[1] - r[2]) <= TOL_MS), None)
        rec.append(None if hit is None else round((hit - end) / 1e6, 1))
    played = float(stats.get("played_ms", 0.0))
    return {
        "underruns": int(stats.get("underruns", 0)),
        "concealed_ms": round(float(stats.get("concealed_ms", 0.0)), 1),
        "played_ms": round(played, 1),
        "concealed_pct": round(100 * float(stats.get("concealed_ms", 0.0)) / max(played, 1), 3),
        "accelerated_ms": round(float(stats.get("accelerated_ms", 0.0)), 1),
        "stretched_ms": round(float(stats.get("stretched_ms", 0.0)), 1),
        "delay_ms_mean": round(float(d.mean()), 1),
        "delay_ms_p95": round(float(np.percentile(d, 95)), 1),
        "target_ms_final": round(float(stats.get("target_delay_ms", 0.0)), 1),
        "stalls": len(rec),
        "recovery_ms": rec,
        "recovery_ms_max": max((r for r in rec if r is not None), default=None),
        "stalls_not_recovered_within_2s": sum(1 for r in rec if r is None or r > 2000),
    }


def echo_produce_ns(n_frames: int, cfg: Any, src_sr: int, sr: int, speed: float) -> list[int]:
    """When the loopback server has each output frame ready (ns after the reply starts):
    the client sends a ``frame_ms`` chunk of ``src_sr`` audio every frame_ms / ``speed``,
    the echo hands it to the output stage, whose own streaming resampler turns it into
    ``sr`` audio (how much comes out of each chunk is its business: the old soxr engine
    released ~50 ms blocks), cut into frames. No sockets, no scheduler."""
    from types import SimpleNamespace

    import numpy as np

    from voicepipe.frames import ReplyAudio
    from voicepipe.stages.output import OutputStage

    stage = OutputStage(cfg, SimpleNamespace(output_sample_rate=sr, frame_ms=cfg.audio.frame_ms))
    chunk = np.zeros(src_sr * cfg.audio.frame_ms // 1000, np.float32)
    frame = sr * cfg.audio.frame_ms // 1000
    out: list[int] = []
    total, i = 0, 0
    while len(out) < n_frames:
        total += len(stage._resample(ReplyAudio(turn_id=1, pcm=chunk, sample_rate=src_sr)))
        t = round(i * cfg.audio.frame_ms * 1e6 / speed)
        while total >= (len(out) + 1) * frame and len(out) < n_frames:
            out.append(t)
        i += 1
    return out


def simulated(
    spec: Any, seconds: float, cfg: Any, src: Any, src_sr: int, sr: int = 22050
) -> dict[str, Any]:
    import numpy as np

    from voicepipe.bench import playout_sim as ps
    from voicepipe.core.playout.faults import FaultSchedule
    from voicepipe.core.playout.jitter import JitterParams

    frame = sr * cfg.audio.frame_ms // 1000
    n = int(seconds * 1000 / cfg.audio.frame_ms)
    produce = echo_produce_ns(n, cfg, src_sr, sr, SPEED)
    frames = ps.through_network(
        ps.frames_for_reply(1, 0, 0, n, frame), sr, spec, produce_ns=produce
    )
    t_end = max(f.arrival_ns for f in frames) + 1_000_000_000
    from voicepipe.audio import resample

    src16 = np.clip(np.round(resample(src, src_sr, sr) * 32767), -32768, 32767).astype(np.int16)
    params = JitterParams.from_config(cfg.jitter, sr, cfg.audio.frame_ms)
    rep = ps.replay(ps.build_events(frames, sr, sr // 100, t_end), params, src16, record_ops=False)
    series = []
    for t, d, g, c in rep.series:
        series.append((t, d, g, c, 0.0))
    stalls = FaultSchedule(spec, 0).stalls_between(0, t_end)
    first = rep.playouts["1"]["first_play_ns"]
    last_arrival = max(f.arrival_ns for f in frames)
    return summarize(series, stalls, rep.stats, first, last_arrival)


async def real(spec: Any, pcm: Any, sr: int, cfg: Any) -> dict[str, Any]:
    from voicepipe.bench._serve import serve_process

    async with serve_process("loopback") as srv:
        return await _through_netsim(spec, pcm, sr, cfg, srv.host, srv.port)


async def _through_netsim(
    spec: Any, pcm: Any, sr: int, cfg: Any, host: str, port: int
) -> dict[str, Any]:
    import asyncio

    from voicepipe.client import ClientSession
    from voicepipe.clock import now_ns
    from voicepipe.core.playout.faults import FaultSchedule
    from voicepipe.netsim import NetSim

    sim = NetSim(("127.0.0.1", 0), (host, port), spec, directions="down")
    h, p = await sim.start()
    session = ClientSession(
        f"ws://{h}:{p}/ws",
        pcm,
        sr,
        cfg,
        playout="adaptive",
        trailing_silence_s=0.5,
        timeout_s=len(pcm) / sr + 30.0,
        speed=SPEED,
    )
    series: list[tuple[int, float, float, float, float]] = []
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            pl = session.playout
            if pl is not None:
                t = now_ns()
                s = pl.stats(t)
                series.append(
                    (
                        t,
                        s["current_delay_ms"],
                        s["target_delay_ms"],
                        s["concealed_ms"],
                        s["played_ms"],
                    )
                )
            await asyncio.sleep(0.02)

    sampler = asyncio.create_task(sample())
    try:
        res = await session.run()
    finally:
        done.set()
        await sampler
        await sim.close()
    stats = dict(res.jitter or {})
    start = sim.conn_starts[0] if sim.conn_starts else now_ns()
    t_end = series[-1][0] if series else start
    stalls = FaultSchedule(spec, start).stalls_between(start, t_end)
    first = res.first_play_ns
    # "until all audio was received": the input stream's length after playout start
    stop = (first or start) + int(len(pcm) / sr * 1e9)  # the reply plays at real time
    out = summarize(series, stalls, stats, first, stop)
    out["netsim"] = sim.stats.as_dict()
    # the proxy's lag behind its own fault schedule: this machine's scheduling noise, which
    # the client's event loop suffers as well (0 on an idle machine, ~1–5 ms)
    out["proxy_late_ms_max"] = round(sim.stats.down.max_late_ns / 1e6, 1)
    out["errors"] = res.errors + ([res.error] if res.error else [])
    return out


def run(args: argparse.Namespace) -> int:
    import asyncio
    import dataclasses
    import os
    import platform

    from voicepipe.core.playout.faults import FaultSpec

    cfg = args.config
    names = args.scenario or sorted(SCENARIOS)
    report: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "seconds": args.seconds,
        "scenarios": {},
    }
    pcm, sr = speech(args.seconds)
    for name in names:
        spec = FaultSpec(seed=args.seed, **SCENARIOS[name])
        entry: dict[str, Any] = {"spec": dataclasses.asdict(spec)}
        entry["simulated"] = simulated(spec, args.seconds, cfg, pcm, sr)
        if not args.no_real:
            entry["real"] = asyncio.run(real(spec, pcm, sr, cfg))
        report["scenarios"][name] = entry
        print(f"bench jitter: {name} done", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for name, e in report["scenarios"].items():
            for kind in ("simulated", "real"):
                if kind in e:
                    r = e[kind]
                    print(
                        f"{name:20s} {kind:9s} underruns={r['underruns']:3d} "
                        f"concealed={r['concealed_pct']:.2f}% delay mean={r['delay_ms_mean']}"
                        f" p95={r['delay_ms_p95']} ms recovery max={r['recovery_ms_max']} ms"
                        + (f" proxy late={r['proxy_late_ms_max']} ms" if kind == "real" else "")
                    )
    return 0
