"""Log-mel spectrogram exactly as HiFi-GAN V1 (universal) was trained.

22,050 Hz audio, n_fft 1024, hop 256, window 1024 (Hann), reflect padding of
(n_fft - hop) / 2 on each side and ``center=False`` (so a wave of N samples
gives exactly N // 256 frames), magnitude sqrt(re² + im² + 1e-9), 80 Slaney
mel filters (librosa's default ``htk=False, norm="slaney"``) from 0 to
8,000 Hz, then log(clamp(x, 1e-5)). Any deviation (centre padding, power
instead of magnitude, HTK mels, log10) makes the vocoder sound worse, so the
filterbank is built here with numpy instead of taken from a library whose
defaults may drift.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

SAMPLE_RATE = 22050
N_FFT = 1024
HOP = 256
WIN = 1024
N_MELS = 80
FMIN = 0.0
FMAX = 8000.0
LOG_FLOOR = 1e-5
PAD = (N_FFT - HOP) // 2  # 384 samples of reflect padding on each side
FRAME_RATE = SAMPLE_RATE / HOP  # 86.13 mel frames per second


def hz_to_mel(f: np.ndarray | float) -> np.ndarray:
    """Slaney mel scale: linear below 1 kHz (3 mels per 200 Hz), logarithmic above."""
    f = np.asarray(f, dtype=np.float64)
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    lin = f / f_sp
    log = min_log_mel + np.log(np.maximum(f, min_log_hz) / min_log_hz) / logstep
    return np.where(f >= min_log_hz, log, lin)


def mel_to_hz(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    lin = f_sp * m
    log = min_log_hz * np.exp(logstep * (m - min_log_mel))
    return np.where(m >= min_log_mel, log, lin)


@lru_cache(maxsize=4)
def mel_filterbank(
    sr: int = SAMPLE_RATE,
    n_fft: int = N_FFT,
    n_mels: int = N_MELS,
    fmin: float = FMIN,
    fmax: float = FMAX,
) -> np.ndarray:
    """(n_mels, n_fft // 2 + 1) float32 triangular filters, Slaney area normalisation."""
    fft_freqs = np.linspace(0.0, sr / 2, n_fft // 2 + 1)
    mel_pts = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_pts)  # (n_mels + 1,)
    ramps = mel_pts[:, None] - fft_freqs[None, :]  # (n_mels + 2, F)
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    # Slaney: each triangle has unit area in Hz so bands carry equal energy density.
    weights *= (2.0 / (mel_pts[2 : n_mels + 2] - mel_pts[:n_mels]))[:, None]
    return weights.astype(np.float32)


_cache: dict[tuple[str, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}


def _basis(device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    key = (str(device), dtype)
    if key not in _cache:
        fb = torch.from_numpy(mel_filterbank()).to(device=device, dtype=dtype)
        win = torch.hann_window(WIN, periodic=True, device=device, dtype=dtype)
        _cache[key] = (fb, win)
    return _cache[key]


def log_mel(wave: torch.Tensor) -> torch.Tensor:
    """(N,) → (80, N // 256) or (B, N) → (B, 80, N // 256); float waves at 22,050 Hz.

    Waves shorter than 385 samples cannot be reflect-padded and raise ValueError.
    """
    if wave.dim() not in (1, 2):
        raise ValueError(f"log_mel expects (N,) or (B, N), got shape {tuple(wave.shape)}")
    single = wave.dim() == 1
    x = wave.unsqueeze(0) if single else wave  # (B, N)
    if not x.is_floating_point():
        raise ValueError("log_mel expects a float wave in [-1, 1]")
    if x.shape[-1] <= PAD:
        raise ValueError(f"wave too short for log_mel: {x.shape[-1]} samples (need > {PAD})")
    x = x.float()
    fb, win = _basis(x.device, x.dtype)
    x = torch.nn.functional.pad(x.unsqueeze(1), (PAD, PAD), mode="reflect").squeeze(1)
    spec = torch.stft(
        x,
        N_FFT,
        hop_length=HOP,
        win_length=WIN,
        window=win,
        center=False,
        normalized=False,
        onesided=True,
        return_complex=True,
    )  # (B, 513, T)
    mag = torch.sqrt(spec.real.square() + spec.imag.square() + 1e-9)
    mel = torch.matmul(fb, mag)  # (B, 80, T)
    out = torch.log(torch.clamp(mel, min=LOG_FLOOR))
    return out[0] if single else out


def n_frames(n_samples: int) -> int:
    """Mel frames that ``log_mel`` returns for a wave of ``n_samples`` samples."""
    return n_samples // HOP
