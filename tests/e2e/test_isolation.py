"""Misbehaving clients end only their own session; the server leaks no tasks.

A well-behaved session streams real-time audio through the loopback pipeline
while, at the same time, other clients send garbage, oversize frames, text
out of order, or vanish mid-stream (TCP reset). The good session must get
back exactly what it sent, and once everything is closed the event loop must
hold no task the server started.
"""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from voicepipe import config
from voicepipe.client import run_sessions
from voicepipe.core.wire import protocol as P
from voicepipe.server.app import Server

MAX_BYTES = 64 * 1024


def _cfg() -> config.Config:
    cfg = config.Config()
    return dataclasses.replace(
        cfg,
        server=dataclasses.replace(cfg.server, max_message_bytes=MAX_BYTES, idle_timeout_s=20.0),
    )


def _audio(seq: int, n: int = 320) -> bytes:
    pcm = (1000 * np.sin(np.arange(n) / 5)).astype(np.int16)
    return P.encode_audio(P.AudioFrame(kind=P.KIND_AUDIO_IN, seq=seq, media_ts=seq * n, pcm=pcm))


async def _open(url: str) -> object:
    ws = await connect(url, compression=None, proxy=None, close_timeout=2)
    await ws.send(P.encode_message(P.Hello(sample_rate=16000, output_sample_rate=16000)))
    ack = P.decode(await ws.recv())
    assert isinstance(ack, P.HelloAck)
    return ws


async def _closed_with(ws: object, first: bytes | str | None) -> tuple[int | None, str]:
    """Send ``first`` (then keep streaming), return the close code the server chose."""
    try:
        if first is not None:
            await ws.send(first)
        for seq in range(1, 200):
            await ws.send(_audio(seq))
            await asyncio.sleep(0.02)
        await asyncio.wait_for(ws.wait_closed(), 5)
    except ConnectionClosed:
        pass
    return ws.close_code, ws.close_reason or ""


async def garbage_binary(url: str) -> tuple[int | None, str]:
    ws = await _open(url)
    await ws.send(_audio(0))
    return await _closed_with(ws, b"\x01\x01garbage that is not a header")


async def garbage_text(url: str) -> tuple[int | None, str]:
    ws = await _open(url)
    return await _closed_with(ws, '{"type": "hello", "sample_rate": "loud"}')


async def oversize(url: str) -> tuple[int | None, str]:
    ws = await _open(url)
    big = P.encode_audio(
        P.AudioFrame(kind=P.KIND_AUDIO_IN, seq=1, media_ts=0, pcm=np.zeros(MAX_BYTES, np.int16))
    )
    return await _closed_with(ws, big)


async def audio_before_hello(url: str) -> tuple[int | None, str]:
    ws = await connect(url, compression=None, proxy=None, close_timeout=2)
    return await _closed_with(ws, _audio(0))


async def server_message_from_client(url: str) -> tuple[int | None, str]:
    ws = await _open(url)
    return await _closed_with(ws, P.encode_message(P.Done()))


async def vanish(url: str) -> None:
    ws = await _open(url)
    for seq in range(10):
        await ws.send(_audio(seq))
        await asyncio.sleep(0.02)
    ws.transport.abort()  # no close frame, no FIN handshake: the client is just gone


async def test_bad_clients_do_not_disturb_a_good_session() -> None:
    cfg = _cfg()
    baseline = asyncio.all_tasks()
    server = Server(cfg, pipeline="loopback", port=0)
    await server.start()
    rate = 16000
    t = np.arange(rate * 2) / rate
    pcm = (0.3 * np.sin(2 * np.pi * 330 * t) * np.sin(2 * np.pi * 1.5 * t)).astype(np.float32)
    try:
        good = asyncio.create_task(
            run_sessions(
                server.ws_url,
                pcm,
                rate,
                cfg,
                speed=1.0,
                output_sample_rate=rate,
                trailing_silence_s=0.1,
            )
        )
        await asyncio.sleep(0.3)  # the good session is streaming when the others strike
        bad = await asyncio.gather(
            garbage_binary(server.ws_url),
            garbage_text(server.ws_url),
            oversize(server.ws_url),
            audio_before_hello(server.ws_url),
            server_message_from_client(server.ws_url),
            vanish(server.ws_url),
        )
        (res,) = await good
        # Every vanished or refused session is gone from the server's books.
        for _ in range(200):
            if not server.sessions:
                break
            await asyncio.sleep(0.05)
        assert not server.sessions
    finally:
        await server.close()

    codes = [b[0] for b in bad[:5]]
    assert codes == [
        P.CLOSE_PROTOCOL_ERROR,
        P.CLOSE_PROTOCOL_ERROR,
        P.CLOSE_MESSAGE_TOO_BIG,
        P.CLOSE_PROTOCOL_ERROR,
        P.CLOSE_PROTOCOL_ERROR,
    ], bad
    assert bad[0][1].startswith("protocol error: unknown audio flags")
    assert "sample_rate" in bad[1][1] and "hello" in bad[3][1] and "server message" in bad[4][1]

    out = res.to_json()
    assert out["ok"] and out["close_code"] == P.CLOSE_NORMAL, out
    sent = P.pcm16_from_float(pcm)
    np.testing.assert_array_equal(res.reply_audio()[: len(sent)], sent)

    await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() - baseline if not t.done()]
    assert leaked == [], [t.get_name() for t in leaked]


async def test_shutdown_mid_stream_closes_1001_and_reaps_everything() -> None:
    cfg = _cfg()
    baseline = asyncio.all_tasks()
    server = Server(cfg, pipeline="loopback", port=0)
    await server.start()
    rate = 16000
    pcm = (0.2 * np.sin(np.arange(rate * 5) / 7)).astype(np.float32)
    clients = asyncio.create_task(
        run_sessions(server.ws_url, pcm, rate, cfg, concurrency=3, output_sample_rate=rate)
    )
    for _ in range(200):  # wait until all three are streaming
        if len(server.sessions) == 3:
            break
        await asyncio.sleep(0.02)
    assert len(server.sessions) == 3
    await server.close(drain_s=0)  # no time for replies in flight: 1001 at once
    results = await asyncio.wait_for(clients, 30)
    assert [r.close_code for r in results] == [P.CLOSE_GOING_AWAY] * 3
    assert all(not r.to_json()["ok"] and "1001" in r.to_json()["error"] for r in results)
    assert not server.sessions
    await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() - baseline if not t.done()]
    assert leaked == [], [t.get_name() for t in leaked]
