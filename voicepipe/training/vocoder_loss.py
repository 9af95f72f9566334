"""Losses of ``voicepipe train vocoder``: spectral distances between a synthesized and
a recorded wave, no discriminator.

A GAN is what makes HiFi-GAN's phase natural, but it trains for days on a GPU; on
two CPU cores for an hour this uses losses a regression can follow:

- multi-resolution STFT (512 / 1024 / 2048 points): spectral convergence plus L1 of
  log magnitudes, the loudness and the fine harmonic structure at three time scales;
- L1 of log-mels (HiFi-GAN's own reconstruction term), the band energies the
  codec's mels carry;
- a compressed complex distance at the vocoder's own resolution (|S|^0.3 · e^{iφ},
  as speech enhancement models train phase): the phase where it is predictable
  (voiced harmonics), weighted towards the bins that are audible.
"""

from __future__ import annotations

import torch
from torch import Tensor

from voicepipe.nn.vocoder.mel import LOG_FLOOR, N_FFT, mel_filterbank

RESOLUTIONS = ((512, 128), (1024, 256), (2048, 512))
COMPRESS = 0.3
_WINDOWS: dict[int, Tensor] = {}


def _stft(x: Tensor, n_fft: int, hop: int) -> Tensor:
    if n_fft not in _WINDOWS:
        _WINDOWS[n_fft] = torch.hann_window(n_fft, periodic=True)
    return torch.stft(x, n_fft, hop, window=_WINDOWS[n_fft], center=True, return_complex=True)


def spectral_losses(y_hat: Tensor, y: Tensor) -> dict[str, Tensor]:
    """(B, N) synthesized and target waves → the named loss terms (scalars)."""
    out: dict[str, Tensor] = {}
    sc = mag = torch.zeros(())
    fb = torch.from_numpy(mel_filterbank())
    for n_fft, hop in RESOLUTIONS:
        s_hat, s = _stft(y_hat, n_fft, hop), _stft(y, n_fft, hop)
        a_hat = (s_hat.real.square() + s_hat.imag.square() + 1e-9).sqrt()
        a = (s.real.square() + s.imag.square() + 1e-9).sqrt()
        sc = sc + torch.linalg.norm(a - a_hat) / torch.linalg.norm(a).clamp_min(1e-6)
        mag = (
            mag
            + (torch.log(a.clamp_min(LOG_FLOOR)) - torch.log(a_hat.clamp_min(LOG_FLOOR)))
            .abs()
            .mean()
        )
        if n_fft == N_FFT:
            mel_hat = torch.log(torch.matmul(fb, a_hat).clamp_min(LOG_FLOOR))
            mel = torch.log(torch.matmul(fb, a).clamp_min(LOG_FLOOR))
            out["mel"] = (mel - mel_hat).abs().mean()
            c_hat = s_hat * a_hat.pow(COMPRESS - 1.0)
            c = s * a.pow(COMPRESS - 1.0)
            out["complex"] = (c - c_hat).abs().square().mean()
    out["sc"] = sc / len(RESOLUTIONS)
    out["mag"] = mag / len(RESOLUTIONS)
    return out


WEIGHTS = {"sc": 1.0, "mag": 1.0, "mel": 2.0, "complex": 1.0}


def total(terms: dict[str, Tensor]) -> Tensor:
    return sum((WEIGHTS[k] * v for k, v in terms.items()), torch.zeros(()))
