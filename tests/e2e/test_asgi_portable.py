"""``Server.app`` is a plain ASGI app: under a stock uvicorn (none of voicepipe's protocol
subclasses, no abort extension) — as under another ASGI server such as a Ray Serve
replica — sessions, health, readiness and the Origin check work once its runner called
``Server.load``, and ``Server.drain`` ends it."""

from __future__ import annotations

import asyncio
import http.client
import socket

import numpy as np
import pytest
import uvicorn
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from voicepipe import config
from voicepipe.client import run_sessions
from voicepipe.core.wire import protocol as P
from voicepipe.server.app import Server

RATE = 16000


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    r = conn.getresponse()
    return r.status, r.read()


async def test_the_app_under_a_stock_asgi_server() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    cfg = config.Config()
    server = Server(cfg, pipeline="loopback", host="127.0.0.1", port=port)  # no start()
    stock = uvicorn.Server(uvicorn.Config(server.app, lifespan="off", log_config=None))
    stock.config.load()
    stock.lifespan = stock.config.lifespan_class(stock.config)
    await stock.startup(sockets=[sock])
    try:
        status, body = await asyncio.to_thread(_get, port, "/healthz")
        assert status == 200 and b'"pipeline": "loopback"' in body
        # Serving before its models are in: not ready, sessions told to come back.
        assert await asyncio.to_thread(_get, port, "/readyz") == (
            503,
            b'{"ready": false, "reason": "loading"}\n',
        )
        with pytest.raises(InvalidStatus) as e:
            await connect(server.ws_url, proxy=None)
        assert e.value.response.status_code == 503
        await server.load()  # what start() does once listening (a Ray replica does it too)
        assert (await asyncio.to_thread(_get, port, "/readyz"))[0] == 200
        t = np.arange(RATE) / RATE
        pcm = (0.3 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
        (res,) = await run_sessions(
            server.ws_url, pcm, RATE, cfg, output_sample_rate=RATE, trailing_silence_s=0.1
        )
        out = res.to_json()
        assert out["ok"] and out["close_code"] == P.CLOSE_NORMAL, out
        np.testing.assert_array_equal(res.reply_audio()[: len(pcm)], P.pcm16_from_float(pcm))
        with pytest.raises(InvalidStatus) as e:
            await connect(server.ws_url, proxy=None, origin="http://evil.example")
        assert e.value.response.status_code == 403
        idle = await connect(server.ws_url, proxy=None)
        await idle.send(P.encode_message(P.Hello(sample_rate=RATE)))
        assert isinstance(P.decode(await idle.recv()), P.HelloAck)
        await server.drain(0)  # a replica leaving: its sessions close with 1001
        await asyncio.wait_for(idle.wait_closed(), 10)
        assert idle.close_code == P.CLOSE_GOING_AWAY
    finally:
        await stock.shutdown()
