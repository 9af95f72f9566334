"""Server admission and limits: auth token, Origin, max sessions, idle timeout, format,
static files, and a failing pipeline stage — each with its documented close code."""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from voicepipe import config
from voicepipe.core.wire import protocol as P
from voicepipe.server.app import Server


def _cfg(**server: object) -> config.Config:
    cfg = config.Config()
    return dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, **server))


@pytest.fixture
async def make_server() -> AsyncIterator:
    servers: list[Server] = []

    async def make(pipeline: str = "loopback", **server: object) -> Server:
        s = Server(_cfg(**server), pipeline=pipeline, port=0)
        await s.start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        await s.close()


async def _hello(url: str, hello: P.Hello, origin: str | None = None) -> tuple[object, object]:
    ws = await connect(url, compression=None, proxy=None, close_timeout=2, origin=origin)
    try:
        await ws.send(P.encode_message(hello))
        return ws, P.decode(await asyncio.wait_for(ws.recv(), 10))
    except ConnectionClosed:
        return ws, None


async def test_token(make_server) -> None:
    s = await make_server(auth_token="sesame")
    ws, reply = await _hello(s.ws_url, P.Hello(sample_rate=16000))
    assert reply is None and ws.close_code == P.CLOSE_BAD_AUTH
    ws, reply = await _hello(s.ws_url, P.Hello(sample_rate=16000, token="wrong"))
    assert reply is None and ws.close_code == P.CLOSE_BAD_AUTH
    ws, reply = await _hello(s.ws_url, P.Hello(sample_rate=16000, token="sesame"))
    assert isinstance(reply, P.HelloAck) and reply.pipeline == "loopback"
    await ws.close()


@pytest.mark.parametrize(
    "hello",
    [
        P.Hello(sample_rate=7000),
        P.Hello(sample_rate=96000),
        P.Hello(sample_rate=16000, format="opus"),
        P.Hello(sample_rate=16000, output_sample_rate=4000),
    ],
)
async def test_wrong_format_or_rate(make_server, hello: P.Hello) -> None:
    s = await make_server()
    ws, reply = await _hello(s.ws_url, hello)
    assert reply is None and ws.close_code == P.CLOSE_BAD_FORMAT
    assert ws.close_reason.startswith(P.CLOSE_REASONS[P.CLOSE_BAD_FORMAT])


async def test_origin_allow_list(make_server) -> None:
    s = await make_server()
    own = f"http://127.0.0.1:{s.port}"
    ws, reply = await _hello(s.ws_url, P.Hello(sample_rate=16000), origin=own)
    assert isinstance(reply, P.HelloAck)
    await ws.close()
    with pytest.raises(InvalidStatus) as e:
        await _hello(s.ws_url, P.Hello(sample_rate=16000), origin="http://evil.example")
    assert e.value.response.status_code == 403
    s2 = await make_server(allowed_origins=["https://app.example"])
    ws, reply = await _hello(s2.ws_url, P.Hello(sample_rate=16000), origin="https://app.example")
    assert isinstance(reply, P.HelloAck)
    await ws.close()
    with pytest.raises(InvalidStatus):
        await _hello(s2.ws_url, P.Hello(sample_rate=16000), origin=f"http://127.0.0.1:{s2.port}")


async def test_too_many_sessions(make_server) -> None:
    s = await make_server(max_sessions=1)
    first, reply = await _hello(s.ws_url, P.Hello(sample_rate=16000))
    assert isinstance(reply, P.HelloAck)
    second, reply = await _hello(s.ws_url, P.Hello(sample_rate=16000))
    assert isinstance(reply, P.Error) and reply.code == "too_many_sessions" and reply.fatal
    assert reply.retry_after_s == 5.0
    await asyncio.wait_for(second.wait_closed(), 10)
    assert second.close_code == P.CLOSE_TOO_MANY_SESSIONS
    assert second.close_reason == "too many sessions: retry in 5 s"
    await first.close()
    for _ in range(100):  # the slot frees once the first session is torn down
        if not s.sessions:
            break
        await asyncio.sleep(0.05)
    third, reply = await _hello(s.ws_url, P.Hello(sample_rate=16000))
    assert isinstance(reply, P.HelloAck)
    await third.close()


async def test_idle_timeout(make_server) -> None:
    s = await make_server(idle_timeout_s=0.3)
    ws, reply = await _hello(s.ws_url, P.Hello(sample_rate=16000))
    assert isinstance(reply, P.HelloAck)
    await asyncio.wait_for(ws.wait_closed(), 10)
    assert ws.close_code == P.CLOSE_IDLE_TIMEOUT
    silent = await connect(s.ws_url, compression=None, proxy=None)  # never says hello
    await asyncio.wait_for(silent.wait_closed(), 10)
    assert silent.close_code == P.CLOSE_IDLE_TIMEOUT
    assert silent.close_reason == "idle timeout: no hello within 5 s"


async def test_failing_pipeline_build_closes_1011(make_server, monkeypatch) -> None:
    from voicepipe.pipelines import loopback

    def broken(cfg: object, session: object) -> list:
        raise RuntimeError("model file missing: run voicepipe models pull x")

    s = await make_server()
    monkeypatch.setattr(loopback, "build", broken)  # fault injection
    ws, reply = await _hello(s.ws_url, P.Hello(sample_rate=16000))
    assert isinstance(reply, P.Error) and reply.fatal and "models pull" in reply.message
    await asyncio.wait_for(ws.wait_closed(), 10)
    assert ws.close_code == P.CLOSE_INTERNAL_ERROR


def _get(port: int, path: str) -> tuple[int, bytes, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    r = conn.getresponse()
    return r.status, r.read(), r.getheader("Content-Type") or ""


async def test_static_files(make_server, tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<h1>voicepipe</h1>")
    (tmp_path / "js").mkdir()
    (tmp_path / "js" / "worklet.js").write_text("registerProcessor('x', class {});")
    (tmp_path.parent / "secret.txt").write_text("no")
    s = await make_server(web_root=str(tmp_path))
    get = lambda path: asyncio.to_thread(_get, s.port, path)  # noqa: E731
    status, body, ctype = await get("/")
    assert status == 200 and b"voicepipe" in body and ctype.startswith("text/html")
    status, body, ctype = await get("/js/worklet.js?v=1")
    assert status == 200 and ctype.startswith("text/javascript")
    assert (await get("/nope.js"))[0] == 404
    assert (await get("/../secret.txt"))[0] == 404
    assert (await get("/%2e%2e/secret.txt"))[0] == 404
    status, body, _ = await get("/healthz")
    assert status == 200 and b'"sessions": 0' in body


def _request(port: int, path: str, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers=headers)
    return conn.getresponse().status


async def test_dns_rebinding_is_refused(make_server) -> None:
    """A page at evil.example re-pointed at 127.0.0.1 sends Host and Origin both naming
    evil.example: the names are judged against the server's own, not the client's Host."""
    s = await make_server()
    evil = f"evil.example:{s.port}"
    upgrade = {
        "Host": evil,
        "Origin": f"http://{evil}",
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
    }
    assert await asyncio.to_thread(_request, s.port, "/ws", upgrade) == 403
    own_upgrade = {**upgrade, "Host": f"127.0.0.1:{s.port}", "Origin": f"http://127.0.0.1:{s.port}"}
    assert await asyncio.to_thread(_request, s.port, "/ws", own_upgrade) == 101

    def host_twice() -> int:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        conn.putrequest("GET", "/healthz", skip_host=True)
        conn.putheader("Host", f"127.0.0.1:{s.port}")
        conn.putheader("Host", evil)
        conn.endheaders()
        return conn.getresponse().status

    assert await asyncio.to_thread(host_twice) == 400
    # Plain HTTP (the page, /metrics) under a foreign name is refused too.
    status = await asyncio.to_thread(_request, s.port, "/metrics", {"Host": evil})
    assert status == 403
    for own in (f"127.0.0.1:{s.port}", f"localhost:{s.port}"):
        assert await asyncio.to_thread(_request, s.port, "/healthz", {"Host": own}) == 200
        ws = await connect(s.ws_url, compression=None, proxy=None, origin=f"http://{own}")
        await ws.close()
    # The right name on another port is another origin.
    with pytest.raises(InvalidStatus):
        await connect(
            s.ws_url, compression=None, proxy=None, origin=f"http://127.0.0.1:{s.port + 1}"
        )
