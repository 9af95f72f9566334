"""Small audio helpers shared by every stage: WAV I/O, resampling (soxr), and speexdsp's
echo canceller (ctypes)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import wave
from pathlib import Path
from typing import Any

import numpy as np
import soxr


def read_wav(path: str | Path) -> tuple[np.ndarray, int]:
    """Mono float32 in [-1, 1] and the sample rate. Multi-channel input is averaged."""
    with wave.open(str(path), "rb") as w:
        sr = w.getframerate()
        ch = w.getnchannels()
        width = w.getsampwidth()
        raw = w.readframes(w.getnframes())
    if width == 2:
        pcm = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    elif width == 4:
        pcm = np.frombuffer(raw, dtype="<i4").astype(np.float32) / 2147483648.0
    elif width == 1:
        pcm = (np.frombuffer(raw, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    else:
        raise ValueError(f"{path}: unsupported sample width {width} bytes")
    if ch > 1:
        pcm = pcm.reshape(-1, ch).mean(axis=1)
    return pcm, sr


def to_pcm16(pcm: np.ndarray) -> np.ndarray:
    return (np.clip(pcm, -1.0, 1.0) * 32767.0).round().astype("<i2")


def write_wav(path: str | Path, pcm: np.ndarray, sample_rate: int) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(to_pcm16(np.asarray(pcm, dtype=np.float32)).tobytes())


def resample(pcm: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    if sr_in == sr_out:
        return np.asarray(pcm, dtype=np.float32)
    return soxr.resample(np.asarray(pcm, dtype=np.float32), sr_in, sr_out, quality="HQ")


# ---------------------------------------------------------------- echo cancellation

# speex_echo.h / speex_preprocess.h request codes
_SPEEX_ECHO_SET_SAMPLING_RATE = 24
_SPEEX_PREPROCESS_SET_ECHO_STATE = 24


class EchoCancellerUnavailable(RuntimeError):
    """libspeexdsp is not installed (or not loadable) here."""


def _speexdsp() -> Any:
    # speexdsp through ctypes: PyPI's ``speexdsp`` has no wheel and ``webrtc-audio-processing``
    # none at all; Debian's libspeexdsp1 is one apt package (README, set-up).
    name = ctypes.util.find_library("speexdsp") or "libspeexdsp.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        raise EchoCancellerUnavailable(
            f"libspeexdsp not found ({e}): apt-get install -y libspeexdsp1"
        ) from e
    lib.speex_echo_state_init.restype = ctypes.c_void_p
    lib.speex_echo_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.speex_echo_cancellation.argtypes = [ctypes.c_void_p] + [ctypes.c_void_p] * 3
    lib.speex_echo_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.speex_echo_state_destroy.argtypes = [ctypes.c_void_p]
    lib.speex_preprocess_state_init.restype = ctypes.c_void_p
    lib.speex_preprocess_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.speex_preprocess_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.speex_preprocess_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.speex_preprocess_state_destroy.argtypes = [ctypes.c_void_p]
    return lib


class EchoCanceller:
    """speexdsp's adaptive acoustic echo canceller and its residual-echo suppressor, one
    stream (one session's microphone), 10 ms frames of float audio at ``sample_rate``.

    ``process(mic, ref)`` takes one frame of the microphone and of the far-end reference
    (what the loudspeaker played, lined up so that it leads its echo by less than
    ``tail_ms``) and returns (the canceller's output, that output after the suppressor).
    The suppressor removes much of what the linear filter leaves, but it is also a noise
    suppressor: callers use its output only while the far end plays. Raises
    ``EchoCancellerUnavailable`` where libspeexdsp is missing."""

    def __init__(self, sample_rate: int = 16000, tail_ms: int = 300) -> None:
        if sample_rate <= 0 or tail_ms <= 0:
            raise ValueError("sample_rate and tail_ms must be > 0")
        self._lib = _speexdsp()
        self.rate = sample_rate
        self.frame = sample_rate // 100
        self._echo = self._lib.speex_echo_state_init(self.frame, sample_rate * tail_ms // 1000)
        self._pre = self._lib.speex_preprocess_state_init(self.frame, sample_rate)
        rate = ctypes.c_int(sample_rate)
        self._lib.speex_echo_ctl(self._echo, _SPEEX_ECHO_SET_SAMPLING_RATE, ctypes.byref(rate))
        self._lib.speex_preprocess_ctl(
            self._pre, _SPEEX_PREPROCESS_SET_ECHO_STATE, ctypes.c_void_p(self._echo)
        )
        self._out = np.zeros(self.frame, np.int16)

    def process(self, mic: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._echo is None:
            raise RuntimeError("EchoCanceller used after close()")
        if len(mic) != self.frame or len(ref) != self.frame:
            raise ValueError(f"one frame is {self.frame} samples: got {len(mic)}, {len(ref)}")
        m = to_pcm16(mic)
        r = to_pcm16(ref)
        self._lib.speex_echo_cancellation(
            self._echo, m.ctypes.data, r.ctypes.data, self._out.ctypes.data
        )
        cancelled = self._out.astype(np.float32) / 32767.0
        self._lib.speex_preprocess_run(self._pre, self._out.ctypes.data)  # in place
        return cancelled, self._out.astype(np.float32) / 32767.0

    def close(self) -> None:
        if self._echo is not None:
            self._lib.speex_preprocess_state_destroy(self._pre)
            self._lib.speex_echo_state_destroy(self._echo)
            self._echo = self._pre = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
