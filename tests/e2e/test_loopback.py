"""Loopback end to end: the client gets back the audio it sent, with a trace.

One run goes through the real command line (`voicepipe serve` and `voicepipe
client --json` as subprocesses); one runs the same code in-process at rates
that force resampling both ways.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from voicepipe import config, tracing
from voicepipe.audio import resample, write_wav
from voicepipe.client import run_sessions
from voicepipe.server.app import Server

VOICEPIPE = [sys.executable, "-m", "voicepipe.cli"]


def voice_like(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    """A harmonic, pitch-gliding, syllable-modulated signal below 4 kHz (speech-shaped)."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * rate)) / rate
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    x = sum(rng.uniform(0.2, 1.0) / h * np.sin(h * phase) for h in range(1, 20) if h * 170 < 4000)
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2
    return (0.25 * x * envelope / np.max(np.abs(x))).astype(np.float32)


def aligned_snr_db(ref: np.ndarray, got: np.ndarray) -> tuple[float, int]:
    """SNR of ``got`` against ``ref`` after the best integer alignment (and its lag)."""
    n = min(len(ref), len(got))
    size = 1 << (2 * n).bit_length()
    spec = np.fft.rfft(got[:n], size) * np.conj(np.fft.rfft(ref[:n], size))
    corr = np.fft.irfft(spec, size)  # corr[k] = Σ got[i + k] ref[i], negative k wrap around
    lag = int(np.argmax(corr))
    lag = lag - size if lag > size // 2 else lag
    a = ref[max(0, -lag) :]
    b = got[max(0, lag) :]
    m = min(len(a), len(b))
    a, b = a[:m], b[:m]
    # Streaming and offline resamplers may also differ by a constant fraction of a sample
    # (soxr's variable-rate engine, used by the output pacer: 0.5 sample at 48 kHz); take
    # it out as a linear phase fitted to the cross-spectrum, weighted by its magnitude.
    fa, fb = np.fft.rfft(a), np.fft.rfft(b)
    w = np.linspace(0, np.pi, len(fa))
    cross = fb * np.conj(fa)
    frac = -np.sum(np.abs(cross) * w * np.angle(cross)) / np.sum(np.abs(cross) * w * w)
    if abs(frac) < 1:
        b = np.fft.irfft(fb * np.exp(1j * w * frac), m)
    a, b = a[200 : m - 200], b[200 : m - 200]  # resampler edges
    return float(10 * np.log10(np.sum(a**2) / (np.sum((a - b) ** 2) + 1e-20))), lag


def _pcm16(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as w:
        assert (w.getframerate(), w.getsampwidth(), w.getnchannels()) == (16000, 2, 1)
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")


def _spawn_server(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [*VOICEPIPE, "serve", "--pipeline", "loopback", "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "serve.log").open("w"),
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "voicepipe: serving http://127.0.0.1:PORT/ ..."
    assert "serving http://" in line, (tmp_path / "serve.log").read_text()
    port = line.split("http://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    return proc, f"ws://127.0.0.1:{port}/ws"


def test_cli_loopback_returns_the_same_samples(tmp_path: Path) -> None:
    wav_in, wav_out = tmp_path / "in.wav", tmp_path / "reply.wav"
    pcm = voice_like(1.5, 16000)
    write_wav(wav_in, pcm, 16000)
    server_trace, client_trace = tmp_path / "server.jsonl", tmp_path / "client.json"
    proc, url = _spawn_server(tmp_path, "--trace", str(server_trace))
    try:
        out = subprocess.run(
            [
                *VOICEPIPE,
                "client",
                "--url",
                url,
                "--wav",
                str(wav_in),
                "--out",
                str(wav_out),
                "--json",
                "--speed",
                "4",
                "--output-rate",
                "16000",
                "--silence",
                "0.2",
                "--trace",
                str(client_trace),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=30)
    assert out.returncode == 0, out.stderr
    assert rc == 0, (tmp_path / "serve.log").read_text()  # Ctrl-C is a clean shutdown
    result = json.loads(out.stdout.strip().splitlines()[0])
    for key in ("transcript", "reply_text", "reply_audio_s", "latency_ms", "jitter"):
        assert key in result
    assert result["ok"] and result["close_code"] == 1000
    assert result["reply_audio_s"] == pytest.approx(1.7, abs=0.001)  # input + 0.2 s silence
    assert result["latency_ms"]["loopback.echo"] >= 0
    assert result["latency_ms"]["client.first_audio"] > 0
    assert result["jitter"]["played_ms"] == pytest.approx(1700, abs=1)

    # Same rate end to end: the very same PCM16 samples come back.
    sent, got = _pcm16(wav_in), _pcm16(wav_out)
    np.testing.assert_array_equal(got[: len(sent)], sent)
    assert len(got) == len(sent) + 3200 and not np.any(got[len(sent) :])

    # Traces: the server's (JSONL) and the client's (Chrome JSON) both hold the spans.
    names = {s.name for s in tracing.load(server_trace)}
    assert {"loopback.echo", "loopback.stream"} <= names
    chrome = json.loads(client_trace.read_text())
    assert {e["name"] for e in chrome["traceEvents"] if e["ph"] == "X"} >= {"loopback.echo"}
    summary = subprocess.run(
        [*VOICEPIPE, "trace", "summarize", str(server_trace), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(summary.stdout)["loopback.stream"]["count"] == 1


@pytest.mark.parametrize("rate_in, rate_out", [(44100, 24000), (8000, 48000)])
async def test_loopback_resampled(rate_in: int, rate_out: int) -> None:
    cfg = config.Config()
    server = Server(cfg, pipeline="loopback", port=0)
    await server.start()
    try:
        pcm = voice_like(1.2, rate_in, seed=rate_in)
        (res,) = await run_sessions(
            server.ws_url,
            pcm,
            rate_in,
            cfg,
            speed=4.0,
            output_sample_rate=rate_out,
            trailing_silence_s=0.2,
        )
    finally:
        await server.close()
    assert res.to_json()["ok"], res.to_json()
    got = res.reply_audio().astype(np.float32) / 32768
    # The path: client rate → ASR rate (16 kHz) → output rate; do the same offline.
    ref = resample(
        resample(pcm, rate_in, cfg.audio.asr_sample_rate), cfg.audio.asr_sample_rate, rate_out
    )
    snr, lag = aligned_snr_db(ref, got)
    assert abs(lag) < rate_out // 100  # streaming resamplers keep the timeline
    assert snr > 30, (snr, lag)
    assert len(got) == pytest.approx(1.4 * rate_out, abs=rate_out * 0.01)
    assert any(s.name == "loopback.echo" for s in res.spans)


def test_session_info_and_discovery() -> None:
    from voicepipe.pipelines import SessionInfo, available, build

    cfg = dataclasses.replace(config.Config())
    info = SessionInfo.for_config(cfg, input_sample_rate=44100)
    assert (info.input_sample_rate, info.asr_sample_rate, info.output_sample_rate) == (
        44100,
        16000,
        22050,
    )
    assert {"loopback", "parrot"} <= set(available())
    stages = build("loopback", cfg, info)
    assert [s.name for s in stages] == ["loopback", "output"]


async def test_parrot_measures_voice_to_voice() -> None:
    """Reply after the end of input: the client measures e2e.voice_to_voice, and the
    server derives its own from the client's playback reports."""
    cfg = config.Config()
    server = Server(cfg, pipeline="parrot", port=0)
    await server.start()
    try:
        pcm = voice_like(0.6, 16000)
        (res,) = await run_sessions(
            server.ws_url,
            pcm,
            16000,
            cfg,
            speed=2.0,
            output_sample_rate=16000,
            trailing_silence_s=0.1,
        )
        for _ in range(100):  # the playback report may land just after the session closed
            if any(s.name == "e2e.voice_to_voice" for s in server.tracer.spans):
                break
            await asyncio.sleep(0.02)
    finally:
        await server.close()
    out = res.to_json()
    assert out["ok"], out
    assert out["transcript"] == ""
    assert out["reply_audio_s"] == pytest.approx(0.7, abs=0.001)
    v2v = out["latency_ms"]["e2e.voice_to_voice"]
    assert v2v > 0  # the reply cannot be heard before the input ended
    assert out["turns"][0]["latency_ms"]["e2e.voice_to_voice"] == v2v
    server_side = [s for s in server.tracer.spans if s.name == "e2e.voice_to_voice"]
    assert len(server_side) == 1 and server_side[0].attrs["measured_by"] == "server"
    assert server_side[0].duration_ms > 0


async def test_client_interrupt_cuts_the_reply() -> None:
    """interrupt → the server answers interrupt(turn + 1), ends the cut reply as
    interrupted, sends not one more frame of it, and the echo goes on as a new reply."""
    from websockets.asyncio.client import connect

    from voicepipe.core.wire import protocol as P

    server = Server(config.Config(), pipeline="loopback", port=0)
    await server.start()
    events: list[tuple[str, int]] = []
    try:
        async with connect(server.ws_url, compression=None, proxy=None) as ws:
            await ws.send(P.encode_message(P.Hello(sample_rate=16000, output_sample_rate=16000)))
            assert isinstance(P.decode(await ws.recv()), P.HelloAck)
            pcm = P.pcm16_from_float(voice_like(3.0, 16000))

            async def stream() -> None:
                for seq, i in enumerate(range(0, len(pcm), 320)):
                    await ws.send(
                        P.encode_audio(
                            P.AudioFrame(
                                kind=P.KIND_AUDIO_IN, seq=seq, media_ts=i, pcm=pcm[i : i + 320]
                            )
                        )
                    )
                    await asyncio.sleep(0.02)
                    if seq == 25:
                        await ws.send(P.encode_message(P.InterruptMsg(turn_id=1)))
                await ws.send(P.encode_message(P.EndInput()))

            sender = asyncio.create_task(stream())
            async for data in ws:
                msg = P.decode(data)
                if isinstance(msg, P.AudioFrame):
                    events.append(("audio", msg.turn_id))
                elif isinstance(msg, P.ReplyEndMsg):
                    events.append(("end-cut" if msg.interrupted else "end", msg.turn_id))
                elif isinstance(msg, (P.InterruptMsg, P.ReplyStart)):
                    events.append((msg.TYPE, msg.turn_id))
            await sender
    finally:
        await server.close()
    assert ("interrupt", 2) in events and ("end-cut", 1) in events
    cut = events.index(("end-cut", 1))
    assert ("audio", 1) in events[:cut]
    assert ("audio", 1) not in events[cut:]  # not one more frame of the cut reply
    assert events.index(("reply_start", 2)) > cut and ("audio", 2) in events
    assert events[-1] == ("end", 2)
