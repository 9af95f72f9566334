"""A frame-rate vocoder for the codec's mels: ConvNeXt blocks → STFT frames → inverse FFT.

Why: HiFi-GAN V1 (13.9 M weights, trained on many voices) runs its convolutions at
the sample rate; in bf16 it costs ~0.29 s per second of audio on one Zen 4 core
(docs/BENCHMARKS.md), most of the TTS's time and the reason eight speaking sessions
do not fit on two cores. This vocoder (Vocos' idea: Siuzdak, 2023) keeps every layer
at the mel frame rate (86 frames/s) and lets an inverse FFT make the samples; it is
trained on this project's one voice (``voicepipe train vocoder``), from the codec's
own quantized mels, so it needs a fraction of the compute.

Layout, all on the mel grid (frame i ↔ output samples [256 i, 256 i + 256)):

    log-mel (80, F) → conv 7 (80 → C) → N × block → LayerNorm → Linear C → 2 · 513
    block: depthwise conv 7 → LayerNorm → Linear C → 3C → GELU → Linear 3C → C, × scale, + input
    → log-magnitude m and phase p per bin → S = exp(m) · e^{ip} → irfft(1024) · Hann
    → overlap-add at hop 256 over the analysis grid of nn/vocoder/mel.py (frame i spans
      samples [256 i − 384, 256 i + 640)), divided by the summed squared window.

Every conv sees ``LEFT`` = 5 frames back and ``RIGHT`` = 1 ahead, so the stack looks
N + 1 frames ahead and the overlap-add two more: with N = 6 a frame's audio is final
once 9 further frames have arrived (HiFi-GAN's exact streaming waits 13.3). Edges
are padded with the log-mel of silence, never zeros (a zero log-mel is loud).
Streaming (``IstftStream``) keeps each conv's last inputs and the overlap-add's
tail, so chunked output equals the whole-utterance pass up to float rounding.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from voicepipe.nn.vocoder.mel import HOP, LOG_FLOOR, N_FFT, N_MELS, PAD

LEFT, RIGHT = 5, 1  # frames a conv sees before and after the one it computes
KERNEL = LEFT + RIGHT + 1
BINS = N_FFT // 2 + 1
SILENCE = math.log(LOG_FLOOR)  # the log-mel of silence: the padding
MEL_MEAN, MEL_STD = -5.0, 2.5  # a fixed input scaling (log-mels span about −11.5 … 2)
MAX_LOG_MAG = 7.0  # exp(7) ≈ 1100: far above any real bin, keeps early training finite
FILE_NAME = "istft_vocoder.pt"


@dataclass(frozen=True)
class IstftArgs:
    channels: int = 256
    blocks: int = 6
    mult: int = 3

    @property
    def lookahead(self) -> int:
        """Mel frames after frame i needed before its audio is final (convs + overlap-add)."""
        return (self.blocks + 1) * RIGHT + (N_FFT // HOP - 2)


class Block(nn.Module):
    def __init__(self, c: int, mult: int, scale: float) -> None:
        super().__init__()
        self.dw = nn.Conv1d(c, c, KERNEL, groups=c)
        self.norm = nn.LayerNorm(c)
        self.up = nn.Linear(c, mult * c)
        self.down = nn.Linear(mult * c, c)
        self.scale = nn.Parameter(torch.full((c,), scale))

    def valid(self, x: Tensor) -> Tensor:
        """(B, C, T + LEFT + RIGHT), its context included → (B, C, T)."""
        h = self.dw(x).transpose(1, 2)
        h = self.down(F.gelu(self.up(self.norm(h)))) * self.scale
        return x[:, :, LEFT : x.shape[2] - RIGHT] + h.transpose(1, 2)


class IstftVocoder(nn.Module):
    window: Tensor  # the Hann window of the inverse FFT (a buffer)

    def __init__(self, args: IstftArgs | None = None) -> None:
        super().__init__()
        self.args = a = args or IstftArgs()
        self.conv_in = nn.Conv1d(N_MELS, a.channels, KERNEL)
        self.blocks = nn.ModuleList(
            Block(a.channels, a.mult, 1.0 / a.blocks) for _ in range(a.blocks)
        )
        self.norm = nn.LayerNorm(a.channels)
        self.head = nn.Linear(a.channels, 2 * BINS)
        self.register_buffer("window", torch.hann_window(N_FFT, periodic=True), persistent=False)

    # -- layers on the mel grid --------------------------------------------------------------
    def block(self, i: int) -> Block:
        b = self.blocks[i]
        assert isinstance(b, Block)
        return b

    def conv_in_valid(self, mel: Tensor) -> Tensor:
        return self.conv_in((mel - MEL_MEAN) / MEL_STD)

    def frames(self, h: Tensor) -> Tensor:
        """(B, C, T) features → (B, T, 1024) windowed time frames (irfft of the head's STFT)."""
        y = self.head(self.norm(h.transpose(1, 2)))  # (B, T, 2 · 513)
        logmag, phase = y[..., :BINS].clamp(max=MAX_LOG_MAG), y[..., BINS:]
        spec = torch.polar(torch.exp(logmag), phase)
        return torch.fft.irfft(spec, n=N_FFT) * self.window

    def forward(self, mel: Tensor) -> Tensor:
        """(80, F) or (B, 80, F) log-mel → (F · 256,) or (B, F · 256) wave at 22,050 Hz."""
        single = mel.dim() == 2
        x = mel[None] if single else mel
        x = self.conv_in_valid(F.pad(x, (LEFT, RIGHT), value=SILENCE))
        for i in range(len(self.blocks)):
            x = self.block(i).valid(F.pad(x, (LEFT, RIGHT)))
        wave = overlap_add(self.frames(x), self.window)
        return wave[0] if single else wave

    # -- persistence ---------------------------------------------------------------------------
    def save(
        self, path: str | Path, *, dtype: torch.dtype = torch.float16, meta: dict | None = None
    ) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.to(dtype) for k, v in self.state_dict().items()}
        torch.save({"args": asdict(self.args), "state": state, "meta": dict(meta or {})}, p)
        return p

    @classmethod
    def load(cls, path: str | Path) -> IstftVocoder:
        ck = torch.load(Path(path), map_location="cpu", weights_only=True)
        m = cls(IstftArgs(**ck["args"]))
        m.load_state_dict({k: v.float() for k, v in ck["state"].items()})
        return m.eval()


def overlap_add(frames: Tensor, window: Tensor) -> Tensor:
    """(B, T, 1024) windowed frames on the analysis grid → (B, T · 256) wave: frame i
    covers samples [256 i − 384, 256 i + 640); divided by the summed squared window
    of the frames that cover each sample."""
    b, t, n = frames.shape
    length = (t - 1) * HOP + n
    out = F.fold(frames.transpose(1, 2), (1, length), (1, n), stride=(1, HOP)).reshape(b, length)
    w2 = (window * window).reshape(1, n, 1).expand(1, n, t)
    norm = F.fold(w2, (1, length), (1, n), stride=(1, HOP)).reshape(1, length)
    return (out / norm.clamp_min(1e-8))[:, PAD : PAD + t * HOP]


def is_istft_vocoder(path: str | Path) -> bool:
    """Whether a model directory or file holds this vocoder (rather than HiFi-GAN)."""
    p = Path(path)
    return (p / FILE_NAME).exists() if p.is_dir() else p.name == FILE_NAME
