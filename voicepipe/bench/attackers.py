"""Hostile WebSocket clients, shared by the hostile test suite and `voicepipe bench hostile`.

Each attack is a small coroutine against a server's ``ws://host:port/ws`` URL
that returns how its connection ended (the close code, or a count), so the
tests assert on it and the benchmark tallies it. ``burst`` runs them all at
once, as an attacker would.

Run as a process of its own (``python -m voicepipe.bench.attackers URL``), the
benchmark's attacker: it lowers its own priority to nice 19, the way a real
attacker's work runs on another machine and not on the server's cores, then
reads commands on stdin, one per line: ``go`` starts a burst, ``stop`` ends it
(the churn stops early; the rest finish) and prints the burst's outcomes as one
JSON line; end of input exits. So the honest client's event loop and clock are
never the attackers', and their CPU yields to the server and the honest client.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from voicepipe.core.wire import protocol as P

NICE = 19  # the attacker process's niceness (stands in for "another machine")
IDLE_SOCKETS = 8
CHURN_CYCLES = 300
TEN_MB = 10 * 1024 * 1024
ABSURD_PLAYBACK = {"first_play_ms": -1.7e308, "now_ms": 1.7e308}


async def open_ws(url: str, local: str | None = None, **kw: Any) -> Any:
    """A plain client connection (no compression, no proxy), optionally from ``local``."""
    from websockets.asyncio.client import connect

    opts: dict[str, Any] = {"close_timeout": 2, "open_timeout": 10, **kw}
    if local is not None:
        opts["local_addr"] = (local, 0)
    return await connect(url, compression=None, proxy=None, **opts)


async def hello(url: str, rate: int = 16000, **kw: Any) -> Any:
    """A connection whose hello was accepted (the hello_ack read)."""
    ws = await open_ws(url, **kw)
    await ws.send(P.encode_message(P.Hello(sample_rate=rate, output_sample_rate=rate)))
    ack = P.decode(await ws.recv())
    if not isinstance(ack, P.HelloAck):
        raise RuntimeError(f"expected hello_ack, got {ack!r}")
    return ws


async def closed(ws: Any, timeout: float = 15) -> int | None:
    """Read until the server closes ``ws`` (or ``timeout``); its close code."""
    from websockets.exceptions import ConnectionClosed

    try:
        async with asyncio.timeout(timeout):
            async for _ in ws:
                pass
    except (ConnectionClosed, TimeoutError):
        pass
    if ws.close_code is None:
        await ws.close()
    code = ws.close_code
    return None if code is None else int(code)


async def idle_sockets(url: str, n: int = IDLE_SOCKETS, **kw: Any) -> list[Any]:
    """``n`` open connections that never say hello (the caller waits for their close)."""
    return [await open_ws(url, **kw) for _ in range(n)]


async def churn(url: str, n: int = CHURN_CYCLES, stop: asyncio.Event | None = None) -> int:
    """Rapid connect/close cycles (until ``stop``); how many were made."""
    done = 0
    for _ in range(n):
        if stop is not None and stop.is_set():
            break
        ws = await open_ws(url)
        await ws.close()
        done += 1
    return done


async def send_after_hello(url: str, data: bytes | str, **kw: Any) -> int | None:
    """Say hello, then send ``data`` (garbage, bad JSON, a huge frame); the close code."""
    from websockets.exceptions import ConnectionClosed

    ws = await hello(url, max_size=None, **kw)
    try:
        await ws.send(data)
    except ConnectionClosed:  # closed while the 10 MB were still going out
        pass
    return await closed(ws)


def playback_report(fields: dict[str, Any] | None = None) -> str:
    """A playback report for turn 1 with ``fields`` (default: absurd times) over it."""
    body = {"type": "playback", "turn_id": 1, "played_samples": 0, "sample_rate": 16000}
    return json.dumps({**body, **(ABSURD_PLAYBACK if fields is None else fields)})


async def absurd_playback(url: str, fields: dict[str, Any] | None = None) -> int | None:
    """A playback report with numbers no client could have measured; the close code."""
    return await send_after_hello(url, playback_report(fields))


def _host_port(url: str) -> tuple[str, int]:
    u = urlsplit(url)
    assert u.hostname is not None and u.port is not None, url
    return u.hostname, u.port


async def never_reading(url: str, rate: int = 16000) -> Any:
    """A session that will never read a byte: a small receive window, said hello.

    (The hello_ack is read here, before the stream starts; nothing after.)"""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: small window
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, _host_port(url))
    return await hello(url, rate, sock=sock, max_queue=1, close_timeout=1)


async def stream_audio(ws: Any, frames: int, rate: int = 16000, level: int = 0) -> None:
    """``frames`` 20 ms frames of a constant ``level`` at real time, never reading."""
    n = rate // 50
    pcm = np.full(n, level, np.int16)
    for seq in range(frames):
        frame = P.AudioFrame(kind=P.KIND_AUDIO_IN, seq=seq, media_ts=seq * n, pcm=pcm)
        await ws.send(P.encode_audio(frame))
        await asyncio.sleep(0.02)


async def vanish(url: str) -> None:
    """Say hello, then drop the TCP connection without a closing handshake."""
    ws = await hello(url)
    ws.transport.abort()


async def slowloris(url: str, timeout: float = 30) -> bytes:
    """An upgrade request that never finishes; what the server sent before it hung up."""
    host, port = _host_port(url)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"GET /ws HTTP/1.1\r\nHost: {host}\r\n".encode())
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()


async def burst(url: str, stop: asyncio.Event) -> Counter[str]:
    """Every attack at once (the churn until ``stop``); how each connection ended."""
    outcomes: Counter[str] = Counter()

    async def idle() -> None:
        socks = await idle_sockets(url)
        for code in await asyncio.gather(*(closed(s) for s in socks)):
            outcomes[f"idle:{code}"] += 1

    async def cycles() -> None:
        outcomes["churn"] += await churn(url, stop=stop)

    async def garbage() -> None:
        for data in (b"\x01\x01junk", '{"type":"hello","sample_rate":"loud"}', bytes(TEN_MB)):
            outcomes[f"garbage:{await send_after_hello(url, data)}"] += 1

    async def playback() -> None:
        outcomes[f"playback:{await absurd_playback(url)}"] += 1

    async def reads_nothing() -> None:
        ws = await never_reading(url)
        await stream_audio(ws, 100)  # speech-free: keeps the socket busy for 2 s
        ws.transport.abort()
        outcomes["never_reads"] += 1

    async def gone() -> None:
        await vanish(url)
        outcomes["vanish"] += 1

    async def loris() -> None:
        got = await slowloris(url)
        outcomes["slowloris:" + ("upgraded" if b" 101 " in got else "cut")] += 1

    attacks = (cycles(), idle(), garbage(), playback(), reads_nothing(), gone(), loris())
    for r in await asyncio.gather(*attacks, return_exceptions=True):
        if isinstance(r, BaseException):
            outcomes[f"client_error:{type(r).__name__}"] += 1
    return outcomes


async def _serve_commands(url: str) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    running: asyncio.Task[Counter[str]] | None = None
    while line := (await loop.run_in_executor(None, sys.stdin.readline)):
        cmd = line.strip()
        if cmd == "go" and running is None:
            stop.clear()
            running = asyncio.create_task(burst(url, stop))
        elif cmd == "stop" and running is not None:
            stop.set()
            print(json.dumps(dict(await running)), flush=True)
            running = None
    if running is not None:
        stop.set()
        await running


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m voicepipe.bench.attackers ws://HOST:PORT/ws", file=sys.stderr)
        return 2
    os.nice(NICE)
    print("ready", flush=True)
    asyncio.run(_serve_commands(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
