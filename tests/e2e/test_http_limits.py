"""HTTP limits of the ASGI server (uvicorn underneath) that uvicorn alone does not set:
every request head, not only the first, must arrive within ``server.handshake_timeout_s``,
and so must a POST body; a browser page and a kept-alive connection still work."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

from voicepipe import config
from voicepipe.server.app import Server

DEADLINE_S = 1.0


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    cfg = config.Config()
    cfg = dataclasses.replace(
        cfg, server=dataclasses.replace(cfg.server, handshake_timeout_s=DEADLINE_S)
    )
    s = Server(cfg, pipeline="loopback", port=0)
    await s.start()
    yield s
    await s.close(drain_s=0)


async def _response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    return head, await asyncio.wait_for(reader.readexactly(length), 10)


async def test_a_kept_alive_connection_cannot_trickle_its_next_request(server: Server) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    host = f"Host: 127.0.0.1:{server.port}\r\n"
    for _ in range(2):  # keep-alive works: two requests on one connection
        writer.write(f"GET /healthz HTTP/1.1\r\n{host}\r\n".encode())
        head, body = await _response(reader)
        assert head.startswith(b"HTTP/1.1 200") and b'"sessions": 0' in body
    writer.write(f"GET /healthz HTTP/1.1\r\n{host}".encode())  # and then no end of head
    await writer.drain()
    rest = await asyncio.wait_for(reader.read(), 10 * DEADLINE_S)  # EOF: closed, no hang
    assert rest == b""
    writer.close()


async def test_a_trickled_body_gets_408(server: Server) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(
        (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model"'
        ).encode()
    )
    await writer.drain()
    head, body = await _response(reader)
    assert head.startswith(b"HTTP/1.1 408") and b'"error"' in body
    writer.close()


async def test_the_page_and_head_requests(server: Server) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(f"GET / HTTP/1.1\r\nHost: localhost:{server.port}\r\n\r\n".encode())
    head, body = await _response(reader)
    assert head.startswith(b"HTTP/1.1 200") and b"<html" in body.lower()
    assert b"cross-origin-opener-policy: same-origin" in head.lower()
    writer.write(f"HEAD /healthz HTTP/1.1\r\nHost: localhost:{server.port}\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200")
    writer.close()


async def test_another_sites_page_cannot_post_to_the_api(server: Server) -> None:
    """A page elsewhere can make the browser POST here (no preflight for a simple
    request); the browser names the page's origin, and the server refuses it."""
    own = f"127.0.0.1:{server.port}"
    for origin, status in (("http://evil.example", b"403"), (f"http://{own}", b"400")):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(
            (
                f"POST /v1/chat/completions HTTP/1.1\r\nHost: {own}\r\nOrigin: {origin}\r\n"
                "Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}"
            ).encode()
        )
        head, _ = await _response(reader)
        assert head.startswith(b"HTTP/1.1 " + status), head  # own origin: on to the API (400)
        writer.close()
