"""Local microphone and speaker for `voicepipe talk`, over the wire protocol.

Audio callbacks run on PortAudio's thread: the input callback hands PCM16
frames to the event loop, the output callback pulls the playout buffer (the
same ``JitterBuffer`` as the headless client and, in JavaScript, the browser),
under a lock because pushes come from the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from typing import Any

import numpy as np
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.playout.jitter import JitterBuffer, JitterParams
from voicepipe.core.wire import protocol as P


class LockedPlayout:
    def __init__(self, jb: JitterBuffer) -> None:
        self.jb = jb
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.jb, name)

        def locked(*a: Any, **kw: Any) -> Any:
            with self.lock:
                return fn(*a, **kw)

        return locked


async def talk(
    cfg: Config,
    sd: Any,
    *,
    url: str | None,
    pipeline: str | None,
    rate: int,
    input_device: Any = None,
    output_device: Any = None,
) -> int:
    server = None
    if url is None:
        from voicepipe.server.app import Server

        server = Server(cfg, pipeline=pipeline, host="127.0.0.1", port=0)
        await server.start()
        url = server.ws_url
    try:
        return await _session(cfg, sd, url, rate, input_device, output_device)
    finally:
        if server is not None:
            await server.close()


async def _session(
    cfg: Config, sd: Any, url: str, rate: int, input_device: Any, output_device: Any
) -> int:
    loop = asyncio.get_running_loop()
    out_rate = int(sd.query_devices(output_device, kind="output")["default_samplerate"])
    mic: asyncio.Queue[np.ndarray] = asyncio.Queue(maxsize=200)
    frame = rate * cfg.audio.frame_ms // 1000

    def on_input(indata: np.ndarray, frames: int, t: Any, status: Any) -> None:
        pcm = indata[:, 0].copy()
        with contextlib.suppress(RuntimeError):  # loop closed while PortAudio still runs
            loop.call_soon_threadsafe(_offer, mic, pcm)

    async with connect(url, max_size=cfg.server.max_message_bytes) as ws:
        await ws.send(
            P.encode_message(
                P.Hello(
                    sample_rate=rate,
                    output_sample_rate=out_rate,
                    token=cfg.server.auth_token,
                    client="voicepipe-talk",
                )
            )
        )
        ack = P.decode(await ws.recv())
        if not isinstance(ack, P.HelloAck):
            print(f"voicepipe talk: server answered {ack!r}", file=sys.stderr)
            return 1
        jb = JitterBuffer(
            JitterParams.from_config(cfg.jitter, ack.output_sample_rate, ack.frame_ms)
        )
        playout = LockedPlayout(jb)

        def on_output(outdata: np.ndarray, frames: int, t: Any, status: Any) -> None:
            outdata[:, 0] = playout.pull(frames, now_ns()) / 32768.0

        print(
            f"voicepipe talk: session {ack.session_id} ({ack.pipeline}); speak, Ctrl-C to stop",
            file=sys.stderr,
        )
        with (
            sd.InputStream(
                samplerate=rate,
                channels=1,
                dtype="int16",
                blocksize=frame,
                device=input_device,
                callback=on_input,
            ),
            sd.OutputStream(
                samplerate=ack.output_sample_rate,
                channels=1,
                dtype="float32",
                device=output_device,
                callback=on_output,
                latency="low",
            ),
        ):
            sender = asyncio.create_task(_send(ws, mic))
            try:
                await _receive(ws, playout, jb)
            finally:
                sender.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                    await sender
    s = jb.stats()
    print(
        f"voicepipe talk: played {s['played_ms'] / 1000:.1f} s, underruns {s['underruns']}, "
        f"concealed {s['concealed_ms']:.0f} ms",
        file=sys.stderr,
    )
    return 0


def _offer(q: asyncio.Queue[np.ndarray], pcm: np.ndarray) -> None:
    if not q.full():  # a stalled connection drops mic audio rather than memory
        q.put_nowait(pcm)


async def _send(ws: Any, mic: asyncio.Queue[np.ndarray]) -> None:
    seq = media = 0
    while True:
        pcm = await mic.get()
        await ws.send(
            P.encode_audio(
                P.AudioFrame(
                    kind=P.KIND_AUDIO_IN, seq=seq, media_ts=media, pcm=pcm.astype(np.int16)
                )
            )
        )
        seq, media = seq + 1, media + len(pcm)


async def _receive(ws: Any, playout: Any, jb: JitterBuffer) -> None:
    reported: dict[int, tuple[bool, bool]] = {}
    async for data in ws:
        msg = P.decode(data)
        if isinstance(msg, P.AudioFrame):
            playout.push(msg.seq, msg.media_ts, msg.pcm, now_ns(), reply=msg.turn_id, last=msg.last)
        elif isinstance(msg, P.Transcript) and msg.final:
            print(f"you: {msg.text}", flush=True)
        elif isinstance(msg, P.ReplyEndMsg):
            playout.end_reply(msg.turn_id)
            print(f"assistant: {msg.text}{' [cut]' if msg.interrupted else ''}", flush=True)
        elif isinstance(msg, P.InterruptMsg):
            playout.clear(msg.turn_id - 1)
        elif isinstance(msg, P.Error):
            print(f"voicepipe talk: server error {msg.code}: {msg.message}", file=sys.stderr)
        with playout.lock:
            items = [(t, p.first_play_ns, p.played_samples, p.done) for t, p in jb.playouts.items()]
            counters = {k: float(v) for k, v in jb.stats().items()}
        for t, first, played, done in items:
            state = (first is not None, done)
            if first is not None and reported.get(t) != state:
                reported[t] = state
                await ws.send(
                    P.encode_message(
                        P.Playback(
                            turn_id=t,
                            played_samples=played,
                            sample_rate=jb.p.sample_rate,
                            first_play_ms=first / 1e6,
                            now_ms=now_ns() / 1e6,
                            done=done,
                            counters=counters,
                        )
                    )
                )
