"""`voicepipe bench e2e --ray`: voice-to-voice through Ray Serve's proxy against direct
`voicepipe serve`, in the same run; sessions per replica; the autoscaler's reaction.

A one-box Ray cluster (a ``ray start`` head process, ``--ray-cpus`` CPUs, no dashboard)
runs ``voicepipe serve --ray`` (``ray.min_replicas`` 1, ``ray.max_replicas`` 2,
``ray.target_sessions_per_replica`` = ``--concurrency``, so that the comparison itself never
scales); a plain ``voicepipe serve`` runs beside it on the same pipeline and config.

1. Overhead: at each concurrency level (1, 2, 4, … up to ``--concurrency``) each batch of
   spoken questions goes to the direct server, then the same batch through the proxy, so
   both see the same machine load. ``overhead_ms`` is the median over questions of
   (through Serve − direct) voice-to-voice of the same question; ``ratio`` the p50s' ratio.
2. Step: 2 × ``--concurrency`` sessions open at once, each a question then ``--hold``
   seconds of a silent open microphone: twice the target, so Serve adds a replica.
   ``up_s``: from the step to the second replica running. Then ``--concurrency`` more
   sessions (one question each) open: they go to the new replica (``sessions_per_replica``).
   When all have ended, ``down_s``: from the last end to one replica again.
   ``dropped``: sessions that did not end with ``done`` or were reconnected.
3. Kill (``--ray-kill``): a second ``serve --ray`` with two replicas fixed
   (``ray.min_replicas`` = ``ray.max_replicas`` = 2), 2 × ``--concurrency`` sessions spread
   over both (each a question, then ``--hold`` seconds of open microphone, reconnecting
   at most twice). The same batch twice: once undisturbed (``control``), once with one
   replica killed (``ray.kill``) two seconds after every session was acknowledged.
   ``victims``: the killed replica's sessions, how each was closed and whether it
   reconnected and finished; ``survivors``: the others, and their playout underruns
   against the same sessions' in the control batch (what the kill cost them).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from voicepipe.config import Config, apply_overrides


def _v2v(s: dict[str, Any]) -> float | None:
    v = s["latency_ms"].get("e2e.voice_to_voice")
    return None if v is None else float(v)


def _replica(session_id: str) -> str:
    return session_id.split("-", 1)[0] if "-" in session_id else ""


def _replicas() -> dict[str, int]:
    from voicepipe.server.ray_serve import replica_states

    return replica_states()


def _healthz_replica(url: str) -> str:
    import json
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as r:
        return str(json.loads(r.read()).get("replica", ""))


def _health_url(ws_url: str) -> str:
    return ws_url.replace("ws://", "http://").removesuffix("/ws") + "/healthz"


async def _until(check: Any, timeout_s: float) -> float:
    """Seconds until ``check()`` held (polled every 0.2 s); raises past ``timeout_s``."""
    t0 = time.monotonic()
    while not await asyncio.to_thread(check):
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"the cluster did not change within {timeout_s:.0f} s")
        await asyncio.sleep(0.2)
    return time.monotonic() - t0


async def _sessions(url: str, cfg: Config, clips: list[Any], **kw: Any) -> list[dict[str, Any]]:
    from voicepipe.client import ClientSession

    sessions = [
        ClientSession(url, clip, 16000, cfg, playout="adaptive", timeout_s=120.0, index=i, **kw)
        for i, clip in enumerate(clips)
    ]
    results = await asyncio.gather(*(s.run() for s in sessions))
    return [r.to_json() for r in results]


def _side(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    from voicepipe.bench.common import pcts

    vals = [v for s in sessions if (v := _v2v(s)) is not None]
    underruns = sum(int(s.get("jitter", {}).get("underruns", 0)) for s in sessions)
    return {
        "voice_to_voice_ms": pcts(vals),
        "failed": len(sessions) - len(vals),
        "underruns": underruns,
    }


async def bench(
    cfg: Config,
    *,
    pipeline: str,
    n_questions: int,
    max_c: int,
    hold_s: float,
    ray_cpus: int,
    log: Any,
    kill: bool = False,
) -> dict[str, Any]:
    from voicepipe.bench._ray import free_port, local_cluster
    from voicepipe.bench._serve import serve_process
    from voicepipe.bench.common import QUESTIONS, pcts, speak
    from voicepipe.bench.e2e_levels import parse_levels

    texts = QUESTIONS[: max(1, min(n_questions, len(QUESTIONS)))]
    clips = await asyncio.to_thread(speak, texts)
    rcfg = apply_overrides(
        cfg,
        ["ray.min_replicas=1", "ray.max_replicas=2", f"ray.target_sessions_per_replica={max_c}"],
    )
    out: dict[str, Any] = {"pipeline": pipeline, "questions": len(texts), "ray": {}}
    log(f"bench e2e --ray: {len(texts)} questions; a Ray head ({ray_cpus} CPUs), two servers …")
    with local_cluster([ray_cpus]) as cluster, cluster.driver():
        port = free_port()
        ray_args = ("--ray", f"--ray.address={cluster.address}")
        async with (
            serve_process(pipeline, cfg) as direct,
            serve_process(
                pipeline,
                rcfg,
                port=port,
                extra_args=ray_args,
                env=cluster.env,
                stop_timeout_s=120.0,
            ) as viaray,  # fmt: skip
        ):
            levels = []
            for c in parse_levels(max_c):
                pair: dict[str, list[dict[str, Any]]] = {"direct": [], "ray": []}
                for start in range(0, len(clips), c):
                    batch = clips[start : start + c]
                    for name, srv in (("direct", direct), ("ray", viaray)):
                        pair[name] += await _sessions(
                            srv.ws_url, cfg, batch, trailing_silence_s=1.5
                        )
                diffs = [
                    r - d
                    for d, r in zip(map(_v2v, pair["direct"]), map(_v2v, pair["ray"]), strict=True)
                    if d is not None and r is not None
                ]
                d_side, r_side = _side(pair["direct"]), _side(pair["ray"])
                d_ms, r_ms = d_side["voice_to_voice_ms"], r_side["voice_to_voice_ms"]
                p_d, p_r = d_ms.get("p50"), r_ms.get("p50")
                lv: dict[str, Any] = {
                    "concurrency": c,
                    "direct": d_side,
                    "ray": r_side,
                    "overhead_ms": pcts(diffs),
                    "ratio_p50": round(p_r / p_d, 3) if p_d and p_r else None,
                    "sessions_per_replica": dict(
                        Counter(_replica(s["session_id"]) for s in pair["ray"])
                    ),
                }
                log(f"  c={c}: {d_ms} direct, {r_ms} via Serve, overhead {lv['overhead_ms']}")
                levels.append(lv)
            out["levels"] = levels
            out["step"] = await _step(viaray.ws_url, rcfg, clips, max_c, hold_s, log)
        if kill:
            kcfg = apply_overrides(rcfg, ["ray.min_replicas=2", "ray.max_replicas=2"])
            async with serve_process(
                pipeline, kcfg, port=port, extra_args=ray_args, env=cluster.env,
                stop_timeout_s=120.0,
            ) as two:  # fmt: skip
                out["kill"] = await _kill(two.ws_url, kcfg, clips, max_c, hold_s, log)
    out["ray"] = {k: v for k, v in vars(rcfg.ray).items() if k != "address"}
    return out


async def _batch(
    url: str, cfg: Config, clips: list[Any], hold_s: float, kill_after_s: float | None
) -> tuple[list[dict[str, Any]], dict[int, str], str]:
    """Sessions opened one at a time (so the ingress spreads them); with ``kill_after_s``,
    the first session's replica is killed that long after the last was acknowledged.
    Returns the results, each session's first id, and the killed replica ('' if none)."""
    import ray

    from voicepipe.client import ClientSession
    from voicepipe.server import ray_serve

    sessions = [
        ClientSession(
            url,
            clip,
            16000,
            cfg,
            playout="adaptive",
            timeout_s=120.0,
            index=i,
            reconnect=2,
            trailing_silence_s=hold_s,
        )
        for i, clip in enumerate(clips)
    ]
    tasks = []
    for sess in sessions:
        tasks.append(asyncio.create_task(sess.run()))
        await _until(lambda sess=sess: bool(sess.res.session_id), 60.0)
    first = {sess.res.index: sess.res.session_id for sess in sessions}
    victim = ""
    if kill_after_s is not None:
        await asyncio.sleep(kill_after_s)
        victim = _replica(first[0])
        name = f"SERVE_REPLICA::{ray_serve.APP_NAME}#{ray_serve.DEPLOYMENT}#{victim}"
        await asyncio.to_thread(lambda: ray.kill(ray.get_actor(name, namespace="serve")))
    results = [r.to_json() for r in await asyncio.gather(*tasks)]
    return results, first, victim


async def _kill(
    url: str, cfg: Config, clips: list[Any], c: int, hold_s: float, log: Any
) -> dict[str, Any]:
    """One of two replicas killed mid-reply: who lost their session, how, and what it cost
    the others (their underruns against an undisturbed run of the same batch)."""
    timeout = 600.0
    await _until(lambda: _replicas() == {"RUNNING": 2}, timeout)
    health = _health_url(url)
    seen: set[str] = set()

    def both_answer() -> bool:  # both in the ingress's list (HAProxy learns after Serve)
        seen.add(_healthz_replica(health))
        return len(seen) == 2

    await _until(both_answer, timeout)
    batch = [clips[i % len(clips)] for i in range(2 * c)]
    log(f"  kill: {len(batch)} sessions on two replicas, undisturbed …")
    control, _, _ = await _batch(url, cfg, batch, hold_s, None)
    await _until(lambda: _replicas() == {"RUNNING": 2}, timeout)
    log("  kill: the same sessions, one replica killed mid-reply …")
    killed, first, victim = await _batch(url, cfg, batch, hold_s, 2.0)
    victims, survivors = [], []
    for res in killed:
        i = int(res["session"])
        lost = res.get("reconnects") or []
        if _replica(first[i]) == victim:
            victims.append({
                "close_codes": [r.get("close_code") for r in lost],
                "close_reasons": [r.get("close_reason") for r in lost],
                "reconnected": bool(lost) and _replica(res["session_id"]) != victim,
                "finished": bool(res["ok"]),
            })  # fmt: skip
        else:
            before = next(r for r in control if int(r["session"]) == i)
            survivors.append({
                "finished": bool(res["ok"]) and not lost,
                "underruns": int(res.get("jitter", {}).get("underruns", 0)),
                "underruns_control": int(before.get("jitter", {}).get("underruns", 0)),
            })  # fmt: skip
    log(f"  kill: {len(victims)} sessions on the killed replica, {len(survivors)} elsewhere")
    return {
        "sessions": len(batch),
        "victim_replica": victim,
        "victims": victims,
        "survivors": survivors,
        "survivor_underruns": sum(s["underruns"] for s in survivors),
        "survivor_underruns_control": sum(s["underruns_control"] for s in survivors),
        "control_ok": sum(bool(r["ok"]) and not r.get("reconnects") for r in control),
    }


async def _step(
    url: str, cfg: Config, clips: list[Any], c: int, hold_s: float, log: Any
) -> dict[str, Any]:
    """Above target: a second replica; below: back to one. Times and sessions of each."""
    timeout = 600.0
    await _until(lambda: _replicas() == {"RUNNING": 1}, timeout)
    health = _health_url(url)
    old = await asyncio.to_thread(_healthz_replica, health)  # the one replica so far
    step = [clips[i % len(clips)] for i in range(2 * c)]
    log(f"  step: {len(step)} sessions holding {hold_s:g} s (target {c} per replica) …")
    first = asyncio.create_task(_sessions(url, cfg, step, trailing_silence_s=hold_s))
    up_s = await _until(lambda: _replicas() == {"RUNNING": 2}, timeout)
    log(f"  step: second replica running after {up_s:.1f} s")
    # and in the ingress's list (a request answered by it), before the next sessions
    await _until(lambda: _healthz_replica(health) != old, timeout)
    later = await _sessions(url, cfg, [clips[i % len(clips)] for i in range(c)])
    results = await first + later
    down_s = await _until(lambda: _replicas() == {"RUNNING": 1}, timeout)
    log(f"  step: back to one replica {down_s:.1f} s after the last session ended")
    dropped = [s["session_id"] for s in results if not s["ok"] or s.get("reconnects")]
    return {
        "sessions": len(results),
        "hold_s": hold_s,
        "up_s": round(up_s, 1),
        "down_s": round(down_s, 1),
        "dropped": dropped,
        "sessions_per_replica": {
            "step": dict(Counter(_replica(s["session_id"]) for s in results[: len(step)])),
            "after_scale_up": dict(Counter(_replica(s["session_id"]) for s in later)),
        },
        "voice_to_voice_ms": _side(results)["voice_to_voice_ms"],
    }
