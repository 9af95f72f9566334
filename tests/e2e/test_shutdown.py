"""Graceful shutdown: stop accepting, let replies in flight finish (bounded), exit 0.

A reply the user is hearing when the operator sends SIGTERM (a deploy, a scale-down)
must not be cut mid-sentence: the server stops listening, sessions with no reply
in flight close at once with 1001, and the others close once their reply is done
(or when ``server.drain_timeout_s`` passes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from websockets.asyncio.client import connect

from voicepipe import config
from voicepipe.client import ClientSession
from voicepipe.core.wire import protocol as P
from voicepipe.server.app import Server

RATE = 16000
VOICEPIPE = [sys.executable, "-m", "voicepipe.cli"]


def _tone(seconds: float) -> np.ndarray:
    t = np.arange(round(RATE * seconds)) / RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


async def _idle_session(url: str) -> object:
    ws = await connect(url, compression=None, proxy=None, close_timeout=2)
    await ws.send(P.encode_message(P.Hello(sample_rate=RATE)))
    assert isinstance(P.decode(await ws.recv()), P.HelloAck)
    return ws


async def test_close_lets_the_reply_in_flight_finish() -> None:
    cfg = config.Config()
    cfg = dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, drain_timeout_s=30.0))
    server = Server(cfg, pipeline="loopback", port=0)
    await server.start()
    url = server.ws_url
    pcm = _tone(3.0)
    talking = ClientSession(url, pcm, RATE, cfg, output_sample_rate=RATE, trailing_silence_s=0.1)
    speaking = asyncio.create_task(talking.run())
    idle = await _idle_session(url)  # said hello, nothing in flight
    for _ in range(200):  # the loopback reply is playing
        if any(s._open_turns for s in server.sessions):
            break
        await asyncio.sleep(0.02)
    closing = asyncio.create_task(server.close())
    await asyncio.wait_for(idle.wait_closed(), 10)
    assert idle.close_code == P.CLOSE_GOING_AWAY
    assert not closing.done()  # still draining the reply
    with pytest.raises(OSError):  # no longer accepting
        await connect(url, compression=None, proxy=None, open_timeout=5)
    res = await asyncio.wait_for(speaking, 60)
    await asyncio.wait_for(closing, 30)
    out = res.to_json()
    assert out["ok"] and out["close_code"] == P.CLOSE_NORMAL, out
    sent = P.pcm16_from_float(pcm)
    np.testing.assert_array_equal(res.reply_audio()[: len(sent)], sent)  # nothing cut


def test_sigterm_mid_reply_finishes_it_and_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        [*VOICEPIPE, "serve", "--pipeline", "parrot", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "serving http://" in line, log.read_text()
        port = line.split("http://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
        url = f"ws://127.0.0.1:{port}/ws"
        pcm = _tone(2.0)

        async def drive() -> object:
            cfg = config.Config()
            client = ClientSession(
                url, pcm, RATE, cfg, output_sample_rate=RATE, speed=4.0, trailing_silence_s=0.1
            )
            task = asyncio.create_task(client.run())
            for _ in range(3000):  # until parrot is playing the recording back
                if client.res.turns:
                    break
                await asyncio.sleep(0.02)
            proc.send_signal(signal.SIGTERM)
            return await asyncio.wait_for(task, 60)

        res = asyncio.run(drive())
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0, log.read_text()
    out = res.to_json()
    assert out["ok"] and out["close_code"] == P.CLOSE_NORMAL, out
    sent = P.pcm16_from_float(pcm)
    np.testing.assert_array_equal(res.reply_audio()[: len(sent)], sent)
