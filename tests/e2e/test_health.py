"""Liveness and readiness, as an operator's load balancer sees them.

`voicepipe serve` (a subprocess, the assistant on the fast profile: real models to load)
listens before its models are in memory. From the moment its port opens: /healthz says
200, /readyz says 503 ``loading`` with Retry-After, a WebSocket or /v1 request gets 503
with Retry-After (never a 404 or a refused connection), and the headless client that
connected that very moment retries and gets its spoken answer. /readyz says 200 only
once a session can start. In process, on the loopback pipeline: ``full`` at
server.max_sessions, ``draining`` once the server drains.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from voicepipe import config
from voicepipe.audio import read_wav
from voicepipe.bench._ray import free_port, stop
from voicepipe.client import ClientSession
from voicepipe.core.wire import protocol as P
from voicepipe.server.app import Server

ROOT = Path(__file__).resolve().parents[2]
CLIP = ROOT / "tests" / "data" / "asr" / "utt11.wav"  # "Why is the sky blue?"


def _get(port: int, path: str, method: str = "GET", body: bytes | None = None) -> tuple:
    """(status, JSON body or text, Retry-After) of one request."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", body, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, raw, retry = r.status, r.read(), r.headers.get("Retry-After")
    except urllib.error.HTTPError as e:
        status, raw, retry = e.code, e.read(), e.headers.get("Retry-After")
    try:
        return status, json.loads(raw), retry
    except ValueError:
        return status, raw.decode(errors="replace"), retry


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


async def test_a_starting_server_says_loading_and_its_first_client_is_served() -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "voicepipe.cli", "serve", "--config", "configs/fast.toml"]
    cmd += ["--pipeline", "assistant", "--port", str(port)]
    # Started and stopped like test_ray's servers; Popen returns at once.
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, start_new_session=True)  # noqa: ASYNC220
    try:
        deadline = time.monotonic() + 300
        while not _listening(port):
            assert proc.poll() is None, "serve exited"
            assert time.monotonic() < deadline, "never listened"
            await asyncio.sleep(0.02)
        # The first client, at once: it must be answered, not refused.
        pcm, sr = read_wav(CLIP)
        cfg = config.load(ROOT / "configs" / "fast.toml")
        first = asyncio.create_task(
            ClientSession(
                f"ws://127.0.0.1:{port}/ws", pcm, sr, cfg, timeout_s=120, trailing_silence_s=1.5
            ).run()  # fmt: skip
        )
        # What a load balancer sees while the models load.
        status, body, retry = await asyncio.to_thread(_get, port, "/readyz")
        assert (status, body, retry) == (503, {"ready": False, "reason": "loading"}, "1")
        status, body, _ = await asyncio.to_thread(_get, port, "/healthz")
        assert status == 200 and body["pipeline"] == "assistant"
        chat = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
        status, body, retry = await asyncio.to_thread(
            _get, port, "/v1/chat/completions", "POST", chat
        )
        assert (status, body["reason"], retry) == (503, "loading", "1")
        with pytest.raises(InvalidStatus) as refused:
            await connect(f"ws://127.0.0.1:{port}/ws", compression=None, proxy=None)
        assert refused.value.response.status_code == 503
        assert refused.value.response.headers["Retry-After"] == "1"
        assert json.loads(refused.value.response.body)["reason"] == "loading"
        # Ready exactly when a session can start: the first 200 is followed by a hello
        # that is acknowledged, not refused.
        while True:
            status, body, _ = await asyncio.to_thread(_get, port, "/readyz")
            if status != 503:
                break
            assert body["reason"] == "loading"
            await asyncio.sleep(0.05)
        assert status == 200 and body["ready"] is True
        ws = await connect(f"ws://127.0.0.1:{port}/ws", compression=None, proxy=None)
        await ws.send(P.encode_message(P.Hello(sample_rate=16000)))
        assert isinstance(P.decode(await asyncio.wait_for(ws.recv(), 30)), P.HelloAck)
        await ws.close()
        res = await first
        out = res.to_json()
        assert out["ok"], out
        assert res.unavailable >= 1  # it came while loading, and was told to come back
        (turn,) = [t for t in out["turns"] if t["transcript"]]
        assert "sky" in turn["transcript"].lower() and turn["reply_audio_s"] > 0.5, turn
    finally:
        stop(proc, signal.SIGINT)


def _cfg(**server: object) -> config.Config:
    cfg = config.Config()
    return dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, **server))


async def test_readyz_says_full_then_draining() -> None:
    server = Server(_cfg(max_sessions=1), pipeline="loopback", port=0)
    await server.start()
    try:
        assert (await asyncio.to_thread(_get, server.port, "/readyz"))[:2] == (
            200,
            {"ready": True, "sessions": 0},
        )
        ws = await connect(server.ws_url, compression=None, proxy=None)
        await ws.send(P.encode_message(P.Hello(sample_rate=16000)))
        assert isinstance(P.decode(await asyncio.wait_for(ws.recv(), 10)), P.HelloAck)
        status, body, retry = await asyncio.to_thread(_get, server.port, "/readyz")
        assert (status, body, retry) == (503, {"ready": False, "reason": "full"}, "1")
        await server.drain(0)  # what a leaving Ray replica does: the port stays open
        assert ws.close_code is None or ws.close_code == P.CLOSE_GOING_AWAY
        status, body, _ = await asyncio.to_thread(_get, server.port, "/readyz")
        assert (status, body) == (503, {"ready": False, "reason": "draining"})
        assert (await asyncio.to_thread(_get, server.port, "/healthz"))[0] == 200
    finally:
        await server.close()
