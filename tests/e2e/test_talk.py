"""`voicepipe talk` on a machine without audio devices (like this one and CI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from voicepipe.commands.talk import check_devices

ROOT = Path(__file__).resolve().parents[2]


def test_talk_without_audio_device_says_so() -> None:
    sd = pytest.importorskip("sounddevice")
    if check_devices(sd) is None:
        pytest.skip("this machine has an audio device")
    proc = subprocess.run(
        [sys.executable, "-m", "voicepipe.cli", "talk"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    assert "no audio input device found" in proc.stderr
    assert "voicepipe serve" in proc.stderr and "voicepipe client --wav" in proc.stderr
    assert "Traceback" not in proc.stderr


class FakeSd:
    """Fault injection only: a PortAudio that sees one output and no input."""

    class PortAudioError(Exception):
        pass

    def query_devices(self, device=None, kind=None):
        out = {"name": "speaker", "max_input_channels": 0, "max_output_channels": 2}
        if kind is None:
            return [out]
        if kind == "input":
            raise self.PortAudioError("Error querying device -1")
        return out


def test_check_devices_names_the_missing_side() -> None:
    msg = check_devices(FakeSd())
    assert msg is not None and "no audio input device" in msg and "1 device(s)" in msg


def test_talk_help_is_helpful() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "voicepipe.cli", "talk", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "libportaudio2" in proc.stdout


class ThreadStream:
    """A sounddevice stream whose 'hardware' is a thread calling back at real time."""

    def __init__(self, samplerate: int, blocksize: int, callback, kind: str, feed=None) -> None:
        import threading

        self.sr, self.block, self.cb = samplerate, blocksize, callback
        self.kind, self.feed = kind, feed
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.recorded: list = []

    def _run(self) -> None:
        import time

        import numpy as np

        t0, k = time.monotonic(), 0
        while not self.stop.is_set():
            if self.kind == "input":
                chunk = self.feed[k * self.block : (k + 1) * self.block]
                if len(chunk) < self.block:
                    chunk = np.zeros(self.block, np.int16)
                self.cb(chunk.reshape(-1, 1), self.block, None, None)
            else:
                out = np.zeros((self.block, 1), np.float32)
                self.cb(out, self.block, None, None)
                self.recorded.append(out[:, 0].copy())
            k += 1
            time.sleep(max(0.0, t0 + k * self.block / self.sr - time.monotonic()))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


async def test_talk_session_round_trip_with_device_threads() -> None:
    # fault injection: audio 'devices' are threads, everything else (server, loopback
    # pipeline, wire protocol, playout) is real
    import asyncio

    import numpy as np

    from voicepipe import config
    from voicepipe.audio import read_wav, resample
    from voicepipe.local_audio import talk

    pcm, sr = read_wav(ROOT / "tests/data/asr/utt01.wav")
    feed = np.round(resample(pcm, sr, 16000) * 32767).astype(np.int16)
    streams: list[ThreadStream] = []
    # the echo comes back at the speaker's 24 kHz: this many non-zero samples is all of it
    want = int(np.count_nonzero(np.round(resample(pcm, sr, 24000) * 32767).astype(np.int16)))

    class Sd(FakeSd):
        def query_devices(self, device=None, kind=None):
            return {
                "name": "x",
                "max_input_channels": 1,
                "max_output_channels": 1,
                "default_samplerate": 24000.0,
            }

        def InputStream(self, samplerate, channels, dtype, blocksize, device, callback):
            streams.append(ThreadStream(samplerate, blocksize, callback, "input", feed))
            return streams[-1]

        def OutputStream(self, samplerate, channels, dtype, device, callback, latency):
            streams.append(ThreadStream(samplerate, samplerate // 100, callback, "output"))
            return streams[-1]

    cfg = config.load(None, [])
    task = asyncio.create_task(talk(cfg, Sd(), url=None, pipeline="loopback", rate=16000))
    for _ in range(600):
        await asyncio.sleep(0.05)
        out = [s for s in streams if s.kind == "output"]
        if out and sum(int(np.count_nonzero(b)) for b in out[0].recorded) >= 0.95 * want:
            break
    task.cancel()
    with __import__("contextlib").suppress(asyncio.CancelledError):
        await task
    played = np.concatenate(streams[1].recorded)
    assert np.abs(played).max() > 0.03  # the speech came back out of the 'speaker'
    assert np.count_nonzero(played) >= 0.95 * want
