"""`voicepipe serve --ray` on a real two-node Ray cluster on loopback.

A Ray head and a second Ray node run as separate ``ray start --block`` processes with one
CPU each; ``voicepipe serve --ray`` (a subprocess, the ``parrot`` pipeline: no models)
deploys onto them with one CPU per replica, so two replicas sit one per node. The project's
headless client talks through Serve's ingress at ws://127.0.0.1:PORT/ws: HAProxy (the
default ``ray.ingress``) and, as the slow variant, Serve's Python proxy.

- A replica killed mid-run costs only its own sessions: they are closed (1006 under
  HAProxy, 1012 with a reason under Serve's proxy) and reconnect to a healthy replica;
  the other replica's sessions finish as if nothing happened.
- The autoscaler goes from one replica to two under a step of sessions and back to one when
  they end, and no session is dropped on the way.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

from voicepipe import config  # noqa: E402
from voicepipe.bench._ray import LocalCluster, free_port, local_cluster, stop  # noqa: E402
from voicepipe.client import ClientSession, SessionResult  # noqa: E402
from voicepipe.core.wire import protocol as P  # noqa: E402
from voicepipe.server import ray_proxy, ray_serve  # noqa: E402

# serve.status() parses each deployment's autoscaling config, and Serve warns each time
# about a field it deprecates (ray_serve.application sets it with its replacement).
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.serve.config")
RATE = 16000
DEADLINE_S = 120.0  # for the cluster to change shape; the test fails past it, it never waits it


def _speech(seconds: float) -> np.ndarray:
    """A voiced-like signal (the parrot pipeline only echoes it back)."""
    t = np.arange(round(RATE * seconds)) / RATE
    return (0.2 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)


@pytest.fixture(
    scope="module",
    # Serve's Python proxy: not the default ingress, and its own middleware is checked
    # below without a cluster; its cluster run is the slow variant.
    params=["haproxy", pytest.param("proxy", marks=pytest.mark.slow)],
)
def cluster(request: pytest.FixtureRequest) -> Iterator[tuple[LocalCluster, str, int]]:
    """A head and a second node, one CPU each, as their own processes; the ``ray.ingress``
    and port Serve runs with on it (Serve keeps those it was first started with); the test
    process joins as a driver (to read Serve's status and to kill a replica)."""
    with local_cluster([1, 1]) as c, c.driver():
        yield c, request.param, free_port()


@contextlib.contextmanager
def _serve(cluster: LocalCluster, port: int, *overrides: str) -> Iterator[subprocess.Popen[bytes]]:
    """``voicepipe serve --ray`` on the cluster, until it printed its URL line; stopped with
    SIGINT (every replica drains, the application goes) on the way out."""
    cmd = [sys.executable, "-m", "voicepipe.cli", "serve", "--ray", "--pipeline", "parrot"]
    cmd += ["--port", str(port), f"--ray.address={cluster.address}", "--ray.replica_cpus=1"]
    cmd += list(overrides)
    # A replica leaving stays reachable this long for HAProxy to forget it (30 s by
    # default); on one machine HAProxy hears of it at once.
    env = {**cluster.env, "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "2"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("voicepipe: serving"), f"serve --ray did not start: {line!r}"
        yield proc
    finally:
        stop(proc, signal.SIGINT)
    assert proc.returncode == 0


def _states() -> dict[str, int]:
    return ray_serve.replica_states()


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


def _healthz_replica(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as r:
        return str(json.loads(r.read())["replica"])


def _replica(session_id: str) -> str:
    return session_id.split("-", 1)[0]


async def test_a_dead_replica_costs_only_its_own_sessions(
    cluster: tuple[LocalCluster, str, int],
) -> None:
    nodes, ingress, port = cluster
    two = ["--ray.min_replicas=2", "--ray.max_replicas=2", f"--ray.ingress={ingress}"]
    with _serve(nodes, port, *two):
        # one replica per node: each node has one CPU, each replica takes one
        assert _states() == {"RUNNING": 2}
        assert ray.available_resources().get("CPU", 0.0) == 0.0
        # Both in the ingress's list too (HAProxy learns of a replica after Serve does).
        seen: set[str] = set()
        await _until("both replicas answering", lambda: seen.add(_healthz_replica(port)) or
                     len(seen) == 2)  # fmt: skip
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
            if ingress == "proxy":  # Serve's proxy, with voicepipe's middleware: a reason
                assert lost["close_code"] == P.CLOSE_REPLICA_LOST
                assert lost["close_reason"].startswith("replica lost")
            else:  # HAProxy drops the tunnel: no close frame
                assert lost["close_code"] == 1006
        else:  # never noticed
            assert res.reconnects == [] and res.session_id == first[res.index]
        assert len(res.reply_audio()) == pytest.approx((8.0 + 0.2) * RATE, abs=RATE * 0.1)


async def test_autoscaling_one_to_two_and_back_drops_no_session(
    cluster: tuple[LocalCluster, str, int],
) -> None:
    nodes, ingress, port = cluster
    if ingress != "haproxy":
        pytest.skip("the autoscaler counts sessions the same under either ingress")
    scale = ["--ray.min_replicas=1", "--ray.max_replicas=2"]
    scale += ["--ray.target_sessions_per_replica=1", "--ray.upscale_delay_s=1"]
    scale += ["--ray.downscale_delay_s=2"]
    with _serve(nodes, port, *scale):
        assert _states() == {"RUNNING": 1}
        # A step of two sessions on one replica with a target of one: a second replica.
        step = [_session(port, 30.0, i) for i in range(2)]
        tasks = [asyncio.create_task(s.run()) for s in step]
        await _until("a second replica running", lambda: _states() == {"RUNNING": 2})
        # ... and in the ingress's list: a request goes to it.
        first_on = _replica(step[0].res.session_id)
        await _until("the ingress using it", lambda: _healthz_replica(port) != first_on)
        # New sessions, one after the other, go to the replica with the fewest of them
        # (HAProxy, restarted with the new list of replicas, counts only its own
        # connections: one each); the step's sessions stay put.
        later = [_session(port, 4.0, 2 + i) for i in range(2)]
        for s in later:
            tasks.append(asyncio.create_task(s.run()))
            await _until("hello acknowledged", lambda s=s: s.res.session_id)
        results = await asyncio.gather(*tasks)
        # All ended: back to one replica, whose leaving dropped nothing.
        await _until("back to one replica", lambda: _states() == {"RUNNING": 1})
    for res in results:
        assert res.done and not res.error and res.reconnects == [], res.to_json()
    assert {_replica(r.session_id) for r in results[:2]} == {first_on}
    assert len({_replica(r.session_id) for r in results}) == 2, [r.session_id for r in results]


async def test_the_proxy_closes_a_websocket_its_replica_left_with_1012() -> None:
    """The proxy's middleware alone, on plain ASGI: an accepted WebSocket whose app returns
    without a close (what Serve's proxy does when the replica dies) gets 1012 and a reason;
    one the app closed itself, or the client closed, gets nothing more."""

    def app_that(then_close: bool) -> object:
        async def app(scope: dict, receive: object, send: object) -> None:
            await send({"type": "websocket.accept"})  # type: ignore[operator]
            if then_close:
                await send({"type": "websocket.close", "code": 1000})  # type: ignore[operator]

        return app

    async def run(then_close: bool) -> list[dict]:
        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        async def receive() -> dict:
            return {"type": "websocket.connect"}

        mw = ray_proxy.ReplicaLostClose(app_that(then_close))  # type: ignore[arg-type]
        await mw({"type": "websocket"}, receive, send)
        return sent

    lost = await run(then_close=False)
    assert [m["type"] for m in lost] == ["websocket.accept", "websocket.close"]
    assert lost[-1]["code"] == P.CLOSE_REPLICA_LOST == 1012
    assert lost[-1]["reason"] == "replica lost: reconnect"
    closed = await run(then_close=True)
    assert [m.get("code") for m in closed] == [None, 1000]


def test_ray_config_errors_name_the_key() -> None:
    bad = {
        "ray.max_replicas": dict(min_replicas=3, max_replicas=2),
        "ray.target_sessions_per_replica": dict(target_sessions_per_replica=0),
        "ray.proxy_location": dict(proxy_location="Everywhere"),
        "ray.ingress": dict(ingress="nginx"),
    }
    for key, values in bad.items():
        with pytest.raises(config.ConfigError, match=key):
            ray_serve.check(dataclasses.replace(config.RayConfig(), **values))  # type: ignore[arg-type]
    with pytest.raises(config.ConfigError, match="ray.min_replica"):
        config.load(overrides=["ray.min_replica=2"])  # a typo names the key
