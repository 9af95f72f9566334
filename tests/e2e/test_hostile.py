"""Hostile clients against a real server on loopback, each beside an honest session.

The attacks a tester ran against ``make run``'s server: sockets that never say
hello (they used to take every session slot), rapid connect/close churn, a
flood from one address, clients that never read, 10 MB frames, slowloris
upgrades, playback reports with absurd numbers, and a session that fails
inside. Each must close only its own connection, with a documented code and a
reason, while an honest client streaming at the same time gets its transcript-
free loopback reply back sample for sample.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import socket
from collections.abc import AsyncIterator

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from voicepipe import config
from voicepipe.client import run_sessions
from voicepipe.core import protocol as P
from voicepipe.server.app import Server

RATE = 16000


def _cfg(**server: object) -> config.Config:
    cfg = config.Config()
    return dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, **server))


@pytest.fixture
async def server(request: pytest.FixtureRequest) -> AsyncIterator[Server]:
    opts = getattr(request, "param", {})
    s = Server(_cfg(**opts), pipeline="loopback", port=0)
    await s.start()
    yield s
    await s.close(drain_s=0)


def _speech(seconds: float) -> np.ndarray:
    t = np.arange(round(RATE * seconds)) / RATE
    return (0.3 * np.sin(2 * np.pi * 330 * t) * np.sin(2 * np.pi * 1.5 * t)).astype(np.float32)


async def _honest(s: Server, seconds: float = 1.5) -> None:
    """A real headless client session; its echo must come back exactly."""
    pcm = _speech(seconds)
    (res,) = await run_sessions(
        s.ws_url, pcm, RATE, s.cfg, output_sample_rate=RATE, trailing_silence_s=0.1
    )
    out = res.to_json()
    assert out["ok"] and out["close_code"] == P.CLOSE_NORMAL, out
    sent = P.pcm16_from_float(pcm)
    np.testing.assert_array_equal(res.reply_audio()[: len(sent)], sent)


async def _metric(s: Server, name: str) -> float:
    text = s.metrics.render().decode()
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


async def _connect(s: Server, local: str = "127.0.0.1", **kw: object) -> object:
    return await connect(
        s.ws_url, compression=None, proxy=None, close_timeout=2, local_addr=(local, 0), **kw
    )


async def _wait_empty(s: Server) -> None:
    for _ in range(200):
        if not s.sessions:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{len(s.sessions)} connections still open")


@pytest.mark.parametrize("server", [{"max_sessions": 8}], indirect=True)
async def test_eight_idle_sockets_do_not_lock_out_an_honest_client(server: Server) -> None:
    idle = [await _connect(server) for _ in range(8)]  # never say hello
    await _honest(server)
    assert server.admission.pending == 8  # they wait in their own pool, not in a session slot
    for ws in idle:
        await asyncio.wait_for(ws.wait_closed(), 15)  # hello_timeout_s (5 s) ends them
        assert ws.close_code == P.CLOSE_IDLE_TIMEOUT
        assert ws.close_reason.startswith("idle timeout: no hello")
    await _wait_empty(server)


async def test_connect_close_churn_beside_an_honest_client(server: Server) -> None:
    async def churn() -> None:
        for _ in range(300):
            ws = await _connect(server)
            await ws.close()

    await asyncio.gather(churn(), _honest(server, 2.0))
    await _wait_empty(server)
    assert server.admission.pending == 0 and server.admission.sessions == 0


@pytest.mark.parametrize(
    "server", [{"max_pending_per_address": 4, "max_pending": 16}], indirect=True
)
async def test_a_flood_from_one_address_evicts_only_its_own(server: Server) -> None:
    flood = [await _connect(server, local="127.0.0.2") for _ in range(10)]
    await asyncio.sleep(0.2)
    assert server.admission.pending_of("127.0.0.2") == 4
    evicted = [ws for ws in flood[:6]]
    for ws in evicted:
        await asyncio.wait_for(ws.wait_closed(), 5)
        assert ws.close_code == P.CLOSE_POLICY
        assert ws.close_reason == "policy violation: too many pending connections"
    await _honest(server)  # from 127.0.0.1: untouched by the flood's cap
    for ws in flood[6:]:
        await ws.close()
    await _wait_empty(server)


@pytest.mark.parametrize("server", [{"send_timeout_s": 1.0}], indirect=True)
async def test_a_client_that_never_reads_is_closed(server: Server) -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: small window
    sock.connect(("127.0.0.1", server.port))
    ws = await connect(
        server.ws_url, sock=sock, compression=None, proxy=None, close_timeout=1, max_queue=1
    )
    await ws.send(P.encode_message(P.Hello(sample_rate=48000, output_sample_rate=48000)))
    pcm = np.full(960, 1000, np.int16)
    honest = asyncio.create_task(_honest(server, 3.0))

    async def stream() -> None:  # keeps the loopback echo flowing, never reads a byte
        for seq in range(1500):
            await ws.send(
                P.encode_audio(
                    P.AudioFrame(kind=P.KIND_AUDIO_IN, seq=seq, media_ts=seq * 960, pcm=pcm)
                )
            )
            await asyncio.sleep(0.02)

    streamer = asyncio.create_task(stream())
    for _ in range(600):  # wait until the server gave up on it
        if await _metric(server, f'voicepipe_closes_total{{code="{P.CLOSE_POLICY}"}}') >= 1:
            break
        await asyncio.sleep(0.05)
    streamer.cancel()
    await asyncio.gather(streamer, return_exceptions=True)
    assert await _metric(server, f'voicepipe_closes_total{{code="{P.CLOSE_POLICY}"}}') == 1
    await honest
    ws.transport.abort()
    await _wait_empty(server)


async def test_ten_megabyte_frame_and_slowloris(server: Server) -> None:
    honest = asyncio.create_task(_honest(server, 2.0))
    ws = await _connect(server, max_size=None)
    await ws.send(P.encode_message(P.Hello(sample_rate=RATE)))
    assert isinstance(P.decode(await ws.recv()), P.HelloAck)
    try:
        await ws.send(b"\x01\x01" + bytes(10 * 1024 * 1024))
        await asyncio.wait_for(ws.wait_closed(), 10)
    except ConnectionClosed:
        pass
    assert ws.close_code == P.CLOSE_MESSAGE_TOO_BIG
    # Slowloris: an upgrade request that never finishes.
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    await writer.drain()
    closed = await asyncio.wait_for(reader.read(), 30)  # handshake_timeout_s: EOF, no hang
    assert b"101" not in closed
    writer.close()
    await honest


@pytest.mark.parametrize(
    "report",
    [
        {"first_play_ms": -1.7e308, "now_ms": 1.7e308},
        {"counters": {"underruns": 1.7e308}, "done": True},
    ],
)
async def test_absurd_playback_reports_close_only_their_session(
    server: Server, report: dict
) -> None:
    import json

    honest = asyncio.create_task(_honest(server, 2.0))
    for _ in range(2):
        ws = await _connect(server)
        await ws.send(P.encode_message(P.Hello(sample_rate=RATE)))
        assert isinstance(P.decode(await ws.recv()), P.HelloAck)
        body = {
            "type": "playback",
            "turn_id": 1,
            "played_samples": 0,
            "sample_rate": RATE,
            **report,
        }
        await ws.send(json.dumps(body))
        await asyncio.wait_for(ws.wait_closed(), 10)
        assert ws.close_code == P.CLOSE_PROTOCOL_ERROR
        assert ws.close_reason.startswith("protocol error: field")
    await honest
    for name in ("underruns", "concealed_ms"):
        value = await _metric(server, f'voicepipe_playout_total{{counter="{name}"}}')
        assert np.isfinite(value) and value < 1e6


async def test_internal_failure_closes_1011_with_an_error(server: Server, monkeypatch) -> None:
    from voicepipe.server import session as session_mod

    def broken(self: object, msg: P.Playback) -> object:
        raise OverflowError("injected fault")

    monkeypatch.setattr(session_mod.Session, "_playback", broken)  # fault injection
    ws = await _connect(server)
    await ws.send(P.encode_message(P.Hello(sample_rate=RATE)))
    assert isinstance(P.decode(await ws.recv()), P.HelloAck)
    await ws.send(P.encode_message(P.Playback(turn_id=1, played_samples=0, sample_rate=RATE)))
    errors = []
    try:
        async for data in ws:
            msg = P.decode(data)
            if isinstance(msg, P.Error):
                errors.append(msg)
    except ConnectionClosed:
        pass
    assert ws.close_code == P.CLOSE_INTERNAL_ERROR
    assert [(e.code, e.fatal) for e in errors] == [("internal_error", True)]
    assert "injected fault" in errors[0].message
    monkeypatch.undo()
    await _honest(server)


async def test_not_utf8_text_closes_1007_as_documented(server: Server) -> None:
    ws = await _connect(server)
    await ws.send(P.encode_message(P.Hello(sample_rate=RATE)))
    assert isinstance(P.decode(await ws.recv()), P.HelloAck)
    # websockets validates UTF-8 itself; write a raw masked text frame with invalid bytes.
    payload, mask = b"\xff\xfe{}", b"\x01\x02\x03\x04"
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    ws.transport.write(bytes([0x81, 0x80 | len(payload)]) + mask + masked)
    await asyncio.wait_for(ws.wait_closed(), 10)
    assert ws.close_code == P.CLOSE_INVALID_DATA
