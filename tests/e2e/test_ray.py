"""`voicepipe serve --ray` on a real two-node Ray cluster on loopback.

A Ray head and a second Ray node run as separate ``ray start --block`` processes with one
CPU each; ``voicepipe serve --ray`` (a subprocess, the ``parrot`` pipeline: no models)
deploys onto them with one CPU per replica, so two replicas sit one per node. The project's
headless client talks through Serve's proxy at ws://127.0.0.1:PORT/ws.

- A replica killed mid-run costs only its own sessions: they get 1012 with a reason and
  reconnect to a healthy replica; the other replica's sessions finish as if nothing happened.
- The autoscaler goes from one replica to two under a step of sessions and back to one when
  they end, and no session is dropped on the way.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

from voicepipe import config  # noqa: E402
from voicepipe.bench._ray import LocalCluster, free_port, local_cluster, stop  # noqa: E402
from voicepipe.client import ClientSession, SessionResult  # noqa: E402
from voicepipe.core import protocol as P  # noqa: E402
from voicepipe.server import ray_serve  # noqa: E402

RATE = 16000
DEADLINE_S = 120.0  # for the cluster to change shape; the test fails past it, it never waits it


def _speech(seconds: float) -> np.ndarray:
    """A voiced-like signal (the parrot pipeline only echoes it back)."""
    t = np.arange(round(RATE * seconds)) / RATE
    return (0.2 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A head and a second node, one CPU each, as their own processes; the test process
    joins as a driver (to read Serve's status and to kill a replica)."""
    with local_cluster([1, 1]) as c, c.driver():
        yield c


@contextlib.contextmanager
def _serve(cluster: LocalCluster, port: int, *overrides: str) -> Iterator[subprocess.Popen[bytes]]:
    """``voicepipe serve --ray`` on the cluster, until it printed its URL line; stopped with
    SIGINT (every replica drains, the application goes) on the way out."""
    cmd = [sys.executable, "-m", "voicepipe.cli", "serve", "--ray", "--pipeline", "parrot"]
    cmd += ["--port", str(port), f"--ray.address={cluster.address}", "--ray.replica_cpus=1"]
    cmd += list(overrides)
    proc = subprocess.Popen(cmd, env=cluster.env, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("voicepipe: serving"), f"serve --ray did not start: {line!r}"
        yield proc
    finally:
        stop(proc, signal.SIGINT)
    assert proc.returncode == 0


def _replicas() -> dict[str, int]:
    """Replica states of the deployment, e.g. {"RUNNING": 2}."""
    app = serve.status().applications.get(ray_serve.APP_NAME)
    if app is None or ray_serve.DEPLOYMENT not in app.deployments:
        return {}
    return {str(k): v for k, v in app.deployments[ray_serve.DEPLOYMENT].replica_states.items()}


async def _until(what: str, check: object) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.2)


def _session(port: int, seconds: float, index: int) -> ClientSession:
    cfg = config.Config()
    url = f"ws://127.0.0.1:{port}/ws"
    return ClientSession(url, _speech(seconds), RATE, cfg, index=index, reconnect=2,
                         output_sample_rate=RATE, trailing_silence_s=0.2)  # fmt: skip


def _replica(session_id: str) -> str:
    return session_id.split("-", 1)[0]


async def test_a_dead_replica_costs_only_its_own_sessions(cluster: LocalCluster) -> None:
    port = free_port()
    with _serve(cluster, port, "--ray.min_replicas=2", "--ray.max_replicas=2"):
        # one replica per node: each node has one CPU, each replica takes one
        assert _replicas() == {"RUNNING": 2}
        assert ray.available_resources().get("CPU", 0.0) == 0.0
        sessions = [_session(port, 8.0, i) for i in range(4)]
        tasks = []
        for s in sessions:  # one at a time, so the proxy sees the load and spreads them
            tasks.append(asyncio.create_task(s.run()))
            await _until("hello acknowledged", lambda s=s: s.res.session_id)
        first = {s.res.index: s.res.session_id for s in sessions}
        on = {_replica(sid) for sid in first.values()}
        assert len(on) == 2, f"sessions all on one replica: {first}"
        victim = _replica(first[0])
        ray.kill(ray.get_actor(f"SERVE_REPLICA::{ray_serve.APP_NAME}#{ray_serve.DEPLOYMENT}#"
                               f"{victim}", namespace="serve"))  # fmt: skip
        results: list[SessionResult] = await asyncio.gather(*tasks)
    for res in results:
        assert res.done and not res.error, res.to_json()
        assert _replica(res.session_id) != victim
        if _replica(first[res.index]) == victim:  # lost once, with a reason, then done
            (lost,) = res.reconnects
            assert lost["session_id"] == first[res.index]
            assert lost["close_code"] == P.CLOSE_REPLICA_LOST
            assert lost["close_reason"].startswith("replica lost")
        else:  # never noticed
            assert res.reconnects == [] and res.session_id == first[res.index]
        assert len(res.reply_audio()) == pytest.approx((8.0 + 0.2) * RATE, abs=RATE * 0.1)


async def test_autoscaling_one_to_two_and_back_drops_no_session(cluster: LocalCluster) -> None:
    port = free_port()
    scale = ["--ray.min_replicas=1", "--ray.max_replicas=2"]
    scale += ["--ray.target_sessions_per_replica=1", "--ray.upscale_delay_s=1"]
    scale += ["--ray.downscale_delay_s=2"]
    with _serve(cluster, port, *scale):
        assert _replicas() == {"RUNNING": 1}
        # A step of two sessions on one replica with a target of one: a second replica.
        step = [_session(port, 30.0, i) for i in range(2)]
        tasks = [asyncio.create_task(s.run()) for s in step]
        await _until("a second replica running", lambda: _replicas() == {"RUNNING": 2})
        # A new session goes to the new replica (the old one holds two); the step's stay put.
        later = [_session(port, 4.0, 2)]
        tasks += [asyncio.create_task(s.run()) for s in later]
        results = await asyncio.gather(*tasks)
        # All ended: back to one replica, whose leaving dropped nothing.
        await _until("back to one replica", lambda: _replicas() == {"RUNNING": 1})
    for res in results:
        assert res.done and not res.error and res.reconnects == [], res.to_json()
    assert len({_replica(r.session_id) for r in results}) == 2
