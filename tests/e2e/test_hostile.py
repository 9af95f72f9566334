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
from collections.abc import AsyncIterator

import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed

from voicepipe import config
from voicepipe.bench import attackers as A
from voicepipe.client import run_sessions
from voicepipe.core.wire import protocol as P
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


async def _wait_empty(s: Server) -> None:
    for _ in range(200):
        if not s.sessions:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{len(s.sessions)} connections still open")


@pytest.mark.parametrize("server", [{"max_sessions": 8}], indirect=True)
async def test_eight_idle_sockets_do_not_lock_out_an_honest_client(server: Server) -> None:
    idle = await A.idle_sockets(server.ws_url, 8)  # never say hello
    await _honest(server)
    assert server.admission.pending == 8  # they wait in their own pool, not in a session slot
    for ws in idle:
        await asyncio.wait_for(ws.wait_closed(), 15)  # hello_timeout_s (5 s) ends them
        assert ws.close_code == P.CLOSE_IDLE_TIMEOUT
        assert ws.close_reason.startswith("idle timeout: no hello")
    await _wait_empty(server)


async def test_connect_close_churn_beside_an_honest_client(server: Server) -> None:
    cycles, _ = await asyncio.gather(A.churn(server.ws_url, 300), _honest(server, 2.0))
    assert cycles == 300
    await _wait_empty(server)
    assert server.admission.pending == 0 and server.admission.sessions == 0
    # Only the one real session's teardown trims memory: 300 connections that never were
    # sessions cost no malloc_trim (it locks the arenas live model threads allocate from).
    trims = "voicepipe_memory_trims_total"
    for _ in range(100):
        if await _metric(server, trims) >= 1:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    assert await _metric(server, trims) == 1


@pytest.mark.parametrize(
    "server", [{"max_pending_per_address": 4, "max_pending": 16}], indirect=True
)
async def test_a_flood_from_one_address_evicts_only_its_own(server: Server) -> None:
    flood = await A.idle_sockets(server.ws_url, 10, local="127.0.0.2")
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
    # Said hello, then never reads a byte: 48 kHz output fills its small window fast.
    ws = await A.never_reading(server.ws_url, 48000)
    honest = asyncio.create_task(_honest(server, 3.0))
    # A steady tone keeps the loopback echo flowing back at it.
    streamer = asyncio.create_task(A.stream_audio(ws, 1500, 48000, level=1000))
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
    code = await A.send_after_hello(server.ws_url, b"\x01\x01" + bytes(A.TEN_MB))
    assert code == P.CLOSE_MESSAGE_TOO_BIG
    # Slowloris: an upgrade request that never finishes; handshake_timeout_s: EOF, no hang.
    closed = await A.slowloris(server.ws_url, 30)
    assert b"101" not in closed
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
    honest = asyncio.create_task(_honest(server, 2.0))
    for _ in range(2):
        ws = await A.hello(server.ws_url, RATE)
        await ws.send(A.playback_report(report))
        assert await A.closed(ws, 10) == P.CLOSE_PROTOCOL_ERROR
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
    ws = await A.hello(server.ws_url, RATE)
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
    ws = await A.hello(server.ws_url, RATE)
    # websockets validates UTF-8 itself; write a raw masked text frame with invalid bytes.
    payload, mask = b"\xff\xfe{}", b"\x01\x02\x03\x04"
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    ws.transport.write(bytes([0x81, 0x80 | len(payload)]) + mask + masked)
    await asyncio.wait_for(ws.wait_closed(), 10)
    assert ws.close_code == P.CLOSE_INVALID_DATA
