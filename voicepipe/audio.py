"""Small audio helpers shared by every stage: WAV I/O and resampling (soxr)."""

from __future__ import annotations

import wave
from pathlib import Path

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
