"""`voicepipe serve --ray` as a load balancer sees it while it deploys: no client refused.

One Ray node (its own ``ray start`` process); ``voicepipe serve --ray`` (a subprocess, the
``parrot`` pipeline) with each ingress: Serve's HAProxy (the default) and its Python proxy.
From the moment the port
opens, until the first replica can take a session, every try gets 503 with Retry-After
(``starting``: no route yet; ``loading``: the replica's models) or is held until the
replica answers: never a 404. The headless client that connects the moment the port
opens is told to come back and then served. /readyz says 200 exactly when a hello is
acknowledged. (Serve's HAProxy would answer 404 until the first replica is up: its
template is rewritten by server/ray_haproxy.py.)
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest

pytest.importorskip("ray.serve")

from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from voicepipe import config
from voicepipe.bench._ray import free_port, local_cluster, stop
from voicepipe.client import ClientSession
from voicepipe.core.wire import protocol as P

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.serve.config")
RATE = 16000
TRIES = 20
TRY_EVERY_S = 0.5
START_DEADLINE_S = 240.0


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _readyz(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        assert e.headers.get("Retry-After") == "1", (e.code, e.headers)
        return e.code, json.loads(e.read())


def _healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


async def _try_session(port: int) -> str:
    """One upgrade and hello: "ack", or "503 <reason>" (anything else fails the test)."""
    try:
        ws = await connect(
            f"ws://127.0.0.1:{port}/ws", compression=None, proxy=None, open_timeout=60
        )
    except InvalidStatus as e:
        status = e.response.status_code
        assert status == 503 and e.response.headers.get("Retry-After") == "1", (
            status,
            e.response.body,
        )
        return f"503 {json.loads(e.response.body)['reason']}"
    try:
        await ws.send(P.encode_message(P.Hello(sample_rate=RATE)))
        reply = P.decode(await asyncio.wait_for(ws.recv(), 30))
        assert isinstance(reply, P.HelloAck), reply
        return "ack"
    finally:
        await ws.close()


@pytest.mark.parametrize("ingress", ["haproxy", "proxy"])
async def test_no_client_refused_while_serve_ray_deploys(ingress: str) -> None:
    port = free_port()
    with local_cluster([2]) as cluster:
        cmd = [sys.executable, "-m", "voicepipe.cli", "serve", "--ray", "--pipeline", "parrot"]
        cmd += ["--port", str(port), f"--ray.address={cluster.address}"]
        cmd += [f"--ray.ingress={ingress}", "--ray.min_replicas=1", "--ray.max_replicas=1"]
        # Popen returns at once; the test then waits on the port, not on the process.
        proc = subprocess.Popen(cmd, env=cluster.env, stdout=subprocess.DEVNULL,  # noqa: ASYNC220
                                start_new_session=True)  # fmt: skip
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + START_DEADLINE_S
            while not _listening(port):
                assert proc.poll() is None, "serve --ray exited"
                assert loop.time() < deadline, "the port never opened"
                await asyncio.sleep(0.05)
            t = np.arange(RATE) / RATE
            speech = (0.2 * np.sin(2 * np.pi * 180 * t)).astype(np.float32)
            first = asyncio.create_task(
                ClientSession(
                    f"ws://127.0.0.1:{port}/ws",
                    speech,
                    RATE,
                    config.Config(),
                    output_sample_rate=RATE,
                    trailing_silence_s=0.2,
                    unavailable_wait_s=START_DEADLINE_S,
                ).run()  # fmt: skip
            )
            answers: list[str] = []
            ready_seen = False
            while len(answers) < TRIES or not ready_seen:
                assert loop.time() < deadline, f"never ready: {answers}"
                status, body = await asyncio.to_thread(_readyz, port)
                if status == 200:
                    ready_seen = True
                    # Ready means ready: a hello right now is acknowledged.
                    assert await _try_session(port) == "ack"
                else:
                    assert status == 503 and body["reason"] in ("starting", "loading"), body
                    # alive while starting: a liveness probe must not restart it
                    assert await asyncio.to_thread(_healthz, port) == 200
                answers.append(await _try_session(port))
                await asyncio.sleep(TRY_EVERY_S)
            res = await first
        finally:
            stop(proc, signal.SIGINT)
    out = res.to_json()
    assert out["ok"] and res.unavailable >= 1, out  # came too early, was told so, then served
    assert len(res.reply_audio()) == pytest.approx(1.2 * RATE, abs=RATE * 0.1)
    assert answers[0].startswith("503"), answers  # the port opened before the replica
    assert answers[-1] == "ack" and set(answers) <= {"ack", "503 starting", "503 loading"}
    print(f"answers over the deploy: {answers}")


def test_the_haproxy_template_answers_starting_where_it_had_no_route() -> None:
    """Serve's HAProxy template, rewritten: a path with no route is 503 starting with
    Retry-After, /healthz 200; the rest of the template as it was."""
    from ray.serve._private import haproxy_templates

    from voicepipe.server import ray_haproxy

    old = haproxy_templates.HAPROXY_CONFIG_TEMPLATE
    new = ray_haproxy.rewrite(old)
    assert new is not None and "return status 404" not in new
    backend = new.split("\nbackend default_backend\n", 1)[1].split("\n{%", 1)[0].splitlines()
    assert backend[0].endswith("if { path /healthz }") and "status 200" in backend[0]
    assert "status 503" in backend[1] and "hdr Retry-After 1" in backend[1]
    assert '\\"reason\\": \\"starting\\"' in backend[1]
    assert new.replace("\n".join(backend), "") == old.replace(
        old.split("\nbackend default_backend\n", 1)[1].split("\n{%", 1)[0], ""
    )
    assert ray_haproxy.rewrite("global\n") is None  # nothing to rewrite: said so


async def test_the_proxy_turns_its_no_route_404_into_503_and_leaves_the_apps_own() -> None:
    """The proxy's middleware alone, on plain ASGI: Serve's "Path '…' not found" (no
    application routed yet) becomes 503 starting with Retry-After, /healthz 200; the
    application's own 404 (a missing file) passes as it was."""
    from voicepipe.server import ray_proxy

    def app_answering(body: bytes) -> object:
        async def app(scope: dict, receive: object, send: object) -> None:
            await send({"type": "http.response.start", "status": 404, "headers": []})  # type: ignore[operator]
            await send({"type": "http.response.body", "body": body})  # type: ignore[operator]

        return app

    async def run(path: str, body: bytes) -> list[dict]:
        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        async def receive() -> dict:
            return {"type": "http.request"}

        mw = ray_proxy.NotDeployedYet(app_answering(body))  # type: ignore[arg-type]
        await mw({"type": "http", "path": path}, receive, send)
        return sent

    no_route = b"Path '/ws' not found. Ping http://.../-/routes for available routes."
    start, body = await run("/ws", no_route)
    assert start["status"] == 503 and (b"retry-after", b"1") in start["headers"]
    assert json.loads(body["body"]) == {"ready": False, "reason": "starting"}
    start, body = await run("/healthz", b"Path '/healthz' not found.")
    assert start["status"] == 200 and json.loads(body["body"])["starting"] is True
    start, body = await run("/nope.js", b"not found\n")
    assert start["status"] == 404 and body["body"] == b"not found\n"
