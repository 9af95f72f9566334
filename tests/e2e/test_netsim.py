"""The fault-injecting TCP proxy on real sockets: client ↔ netsim ↔ loopback server."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import numpy as np

from voicepipe import config
from voicepipe.audio import read_wav
from voicepipe.client import ClientSession
from voicepipe.core.playout.faults import FaultSpec
from voicepipe.netsim import NetSim, parse_hostport
from voicepipe.server.app import Server

ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000


async def _echo_server() -> tuple[asyncio.base_events.Server, int]:
    async def echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while data := await r.read(4096):
            w.write(data)
            await w.drain()
        w.close()

    srv = await asyncio.start_server(echo, "127.0.0.1", 0)
    return srv, srv.sockets[0].getsockname()[1]


async def test_proxy_delays_but_keeps_every_byte_in_order() -> None:
    srv, port = await _echo_server()
    sim = NetSim(("127.0.0.1", 0), ("127.0.0.1", port), FaultSpec(delay_ms=30, jitter_ms=10))
    host, pport = await sim.start()
    r, w = await asyncio.open_connection(host, pport)
    sent = bytearray()
    for i in range(40):
        chunk = bytes([i]) * (100 + i)
        sent += chunk
        w.write(chunk)
        await w.drain()
        await asyncio.sleep(0.005)
    got = bytearray()
    while len(got) < len(sent):
        got += await asyncio.wait_for(r.read(65536), 10)
    assert bytes(got) == bytes(sent)
    w.close()
    await sim.close()
    srv.close()
    st = sim.stats
    assert st.connections == 1 and st.up.bytes == len(sent) and st.down.bytes == len(sent)
    # every chunk was held at least delay - jitter on each leg (sleep never ends early)
    assert st.up.held_ns >= st.up.chunks * 20 * MS
    assert st.down.held_ns >= st.down.chunks * 20 * MS


async def test_client_through_stalling_proxy_hears_every_sample() -> None:
    cfg = config.load(None, [])
    server = Server(cfg, pipeline="loopback", host="127.0.0.1", port=0)
    await server.start()
    up = parse_hostport(server.ws_url.split("//")[1].split("/")[0])
    spec = FaultSpec(delay_ms=40, jitter_ms=20, stall_ms=250, stall_every_s=1.5, seed=4)
    sim = NetSim(("127.0.0.1", 0), up, spec, directions="down")
    host, port = await sim.start()
    pcm, sr = read_wav(ROOT / "tests/data/asr/utt01.wav")
    session = ClientSession(
        f"ws://{host}:{port}/ws",
        pcm,
        sr,
        cfg,
        playout="adaptive",
        trailing_silence_s=0.3,
        timeout_s=30,
    )
    try:
        res = await session.run()
    finally:
        await sim.close()
        await server.close()
    assert not res.errors and not res.error, (res.errors, res.error)
    # stalls really happened on the way down: chunks were held about a stall's length
    assert sim.stats.down.max_held_ns >= 200 * MS
    j = res.jitter
    for key in (
        "underruns",
        "concealed_ms",
        "accelerated_ms",
        "stretched_ms",
        "current_delay_ms",
        "target_delay_ms",
    ):
        assert key in j
    # loopback: what came back is what was sent; the playout played all of it, once
    out = res.reply_audio()
    sent_s = len(pcm) / sr + 0.3
    assert abs(len(out) / res.output_sample_rate - sent_s) < 0.05
    assert j["played_ms"] == len(out) * 1000 / res.output_sample_rate
    assert j["lost_frames"] == 0 and j["duplicate_frames"] == 0
    turn = res.turns[min(res.turns)]
    assert turn.frames and np.abs(out).max() > 1000
    assert res.first_play_ns is not None


async def test_netsim_command_forwards() -> None:
    srv, port = await _echo_server()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "voicepipe.cli",
        "netsim",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        f"127.0.0.1:{port}",
        "--delay-ms",
        "5",
        "--jitter-ms",
        "2",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        m = re.search(r"netsim: ([\d.]+):(\d+) →", line)
        assert m, line
        r, w = await asyncio.open_connection(m.group(1), int(m.group(2)))
        w.write(b"hello through the proxy")
        await w.drain()
        got = b""
        while len(got) < 23:
            got += await asyncio.wait_for(r.read(100), 10)
        assert got == b"hello through the proxy"
        w.close()
    finally:
        proc.terminate()
        await proc.wait()
        srv.close()
    assert proc.returncode == 0


async def test_netsim_command_rejects_bad_address() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "voicepipe.cli",
        "netsim",
        "--listen",
        "nowhere",
        "--upstream",
        "127.0.0.1:1",
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    assert proc.returncode == 2 and b"HOST:PORT" in err
