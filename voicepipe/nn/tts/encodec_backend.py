"""EnCodec 24 kHz (Défossez et al. 2022) behind the same interface as ``MelVQCodec``.

For users who have the 24 kHz weights as a local file (e.g. ``encodec_24khz-d7cc33bc.th``
from a machine with internet); nothing here downloads. Select it with
``--codec.backend=encodec --codec.encodec_path=FILE``.

Install: ``pip install --no-deps encodec==0.1.1 einops`` (``make setup`` does this).
The package's own ``encodec/__init__.py`` imports ``encodec.utils``, which
imports torchaudio at module import, and its declared dependencies pull
torchaudio (a multi-GB CUDA torch). We therefore never execute that
``__init__``: ``_encodec_parts`` imports only the ``encodec.modules`` (SEANet
encoder/decoder, LSTM, convs) and ``encodec.quantization`` (RVQ) subpackages,
which need only torch, numpy and einops, and this file assembles the model
exactly like ``EncodecModel.encodec_model_24khz`` (causal SEANet, weight norm,
no normalisation, 32 codebooks × 1024 at 75 frames/s; q codebooks =
0.75 · q kbps).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import operator
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

SAMPLE_RATE = 24000
N_Q_MAX = 32
BINS = 1024


def _encodec_parts() -> tuple[types.ModuleType, types.ModuleType]:
    """(encodec.modules, encodec.quantization) without running encodec/__init__.py."""
    if "encodec.modules" in sys.modules and "encodec.quantization" in sys.modules:
        return sys.modules["encodec.modules"], sys.modules["encodec.quantization"]
    spec = importlib.util.find_spec("encodec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the EnCodec backend needs the encodec package's model code: "
            "pip install --no-deps encodec==0.1.1 einops (never without "
            "--no-deps: it would pull torchaudio and a CUDA torch)"
        )
    stub = "encodec" not in sys.modules
    if stub:
        # A bare package object: Python finds the submodules via __path__ and never
        # executes the package's __init__ (the part that imports torchaudio).
        pkg = types.ModuleType("encodec")
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__spec__ = spec
        sys.modules["encodec"] = pkg
    try:
        with warnings.catch_warnings():  # encodec uses the deprecated weight_norm API
            warnings.simplefilter("ignore", FutureWarning)
            mods = importlib.import_module("encodec.modules")
            quant = importlib.import_module("encodec.quantization")
    finally:
        if stub:
            del sys.modules["encodec"]  # a later real `import encodec` still works
    return mods, quant


class _EncodecNet(nn.Module):
    """encoder / quantizer / decoder with the attribute names of the checkpoint's keys."""

    def __init__(self, random_codebooks: bool = False) -> None:
        super().__init__()
        m, qt = _encodec_parts()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            self.encoder = m.SEANetEncoder(channels=1, norm="weight_norm", causal=True)
            self.decoder = m.SEANetDecoder(channels=1, norm="weight_norm", causal=True)
        # kmeans_init=False gives uniform random codebooks (the pretrained ones overwrite them).
        self.quantizer = qt.ResidualVectorQuantizer(
            dimension=self.encoder.dimension,
            n_q=N_Q_MAX,
            bins=BINS,
            kmeans_init=not random_codebooks,
        )
        self.hop = int(np.prod(self.encoder.ratios))  # 320 samples
        self.frame_rate = math.ceil(SAMPLE_RATE / self.hop)  # 75

    def fold(self) -> None:
        """Remove weight norm (plain conv weights at inference)."""
        for mod in self.modules():
            if hasattr(mod, "weight_g") and hasattr(mod, "weight_v"):
                torch.nn.utils.remove_weight_norm(mod)


class EncodecCodec:
    """Same surface as MelVQCodec: encode (T, q) / decode / stream_decoder / distances."""

    def __init__(self, net: _EncodecNet, *, q: int = 8) -> None:
        if not 1 <= q <= N_Q_MAX:
            raise ValueError(f"q={q} outside 1..{N_Q_MAX} for EnCodec 24 kHz")
        self.net = net.eval()
        self.q = q
        self.levels = N_Q_MAX
        self.codebook_size = BINS
        self.sample_rate = SAMPLE_RATE
        self.frame_rate = float(net.frame_rate)
        self.step_samples = net.hop

    @classmethod
    def load(cls, path: str | Path, *, q: int = 8) -> EncodecCodec:
        """From a local EnCodec 24 kHz checkpoint (a state dict saved with torch.save)."""
        p = Path(path).expanduser()
        if not p.is_file():
            raise FileNotFoundError(
                f"{p}: no EnCodec checkpoint there (need the 24 kHz "
                "weights, e.g. encodec_24khz-d7cc33bc.th, as a local file)"
            )
        try:
            state = torch.load(p, map_location="cpu", weights_only=True)
        except Exception as e:
            raise ValueError(f"{p}: not a readable EnCodec checkpoint ({e})") from e
        net = _EncodecNet()
        # Original checkpoints carry weight norm (weight_g / weight_v); ours are folded.
        if not any(k.endswith(".weight_g") for k in state):
            net.fold()
        try:
            net.load_state_dict(state)
        except RuntimeError as e:
            raise ValueError(f"{p}: not an EnCodec 24 kHz checkpoint ({e})"[:600]) from e
        net.fold()
        return cls(net, q=q)

    @classmethod
    def random(cls, *, q: int = 8, seed: int = 0, fold: bool = True) -> EncodecCodec:
        """Random weights (tests; the architecture and code paths are the real ones).

        ``fold=False`` keeps weight norm, so ``save`` writes the original checkpoint layout.
        """
        torch.manual_seed(seed)
        net = _EncodecNet(random_codebooks=True)
        if fold:
            net.fold()
        return cls(net, q=q)

    def save(self, path: str | Path) -> Path:
        """Write the weights as a state dict, a layout ``load`` reads."""
        torch.save(self.net.state_dict(), path)
        return Path(path)

    @property
    def codebooks(self) -> torch.Tensor:
        """(32, 1024, 128) code vectors of every level."""
        return torch.stack([lay._codebook.embed for lay in self.net.quantizer.vq.layers])

    @torch.inference_mode()
    def encode(self, wave) -> torch.Tensor:
        """(N,) float wave at 24 kHz → (T, q) int64, T = ceil(N / 320)."""
        w = (
            torch.as_tensor(
                np.asarray(wave, dtype=np.float32) if not torch.is_tensor(wave) else wave
            )
            .float()
            .reshape(1, 1, -1)
        )
        emb = self.net.encoder(w)  # (1, 128, T)
        codes = self.net.quantizer.vq.encode(emb, n_q=self.q)  # (q, 1, T)
        return codes[:, 0].transpose(0, 1).long().contiguous()

    @torch.inference_mode()
    def decode(self, codes) -> torch.Tensor:
        """(T, q') → (T · 320,) float32 wave at 24 kHz."""
        c = torch.as_tensor(np.asarray(codes) if not torch.is_tensor(codes) else codes).long()
        if c.shape[0] == 0:
            return torch.zeros(0)
        emb = self.net.quantizer.vq.decode(c.transpose(0, 1)[:, None, :])  # (1, 128, T)
        return self.net.decoder(emb)[0, 0].float()

    def stream_decoder(self, *, left: int = 50, lookahead: int = 1) -> EncodecStreamDecoder:
        return EncodecStreamDecoder(self, left=left, lookahead=lookahead)

    def code_distance(self, a, b, level: int = 0) -> torch.Tensor:
        cb = self.codebooks[level]
        return (
            (cb[torch.as_tensor(a).long()] - cb[torch.as_tensor(b).long()]).square().mean(-1).sqrt()
        )

    def frame_distance(self, codes_a, codes_b) -> torch.Tensor:
        cb = self.codebooks
        a, b = torch.as_tensor(codes_a).long(), torch.as_tensor(codes_b).long()
        # (reduce, not sum: the same additions in the same order, without sum's int 0)
        va = functools.reduce(operator.add, (cb[lvl][a[..., lvl]] for lvl in range(a.shape[-1])))
        vb = functools.reduce(operator.add, (cb[lvl][b[..., lvl]] for lvl in range(b.shape[-1])))
        return (va - vb).square().mean(-1).sqrt()


class EncodecStreamDecoder:
    """Codes in → audio out; re-decodes ``left`` frames of context (the decoder is causal,
    but its LSTM and transposed convs carry state), holds back ``lookahead`` frames
    whose samples the next frame's transposed convs still add to."""

    def __init__(self, codec: EncodecCodec, *, left: int = 50, lookahead: int = 1) -> None:
        self.codec = codec
        self.left = left
        self.lookahead = lookahead
        self.reset()

    def reset(self) -> None:
        self._codes: torch.Tensor | None = None
        self._start = 0
        self._emitted = 0

    def _synth(self, end: int) -> torch.Tensor:
        assert self._codes is not None
        lo = max(self._start, self._emitted - self.left)
        wave = self.codec.decode(self._codes[lo - self._start :])
        hop = self.codec.step_samples
        out = wave[(self._emitted - lo) * hop : (end - lo) * hop]
        self._emitted = end
        keep = max(self._start, end - self.left)
        self._codes = self._codes[keep - self._start :]
        self._start = keep
        return out

    def push(self, codes) -> torch.Tensor:
        c = torch.as_tensor(np.asarray(codes) if not torch.is_tensor(codes) else codes).long()
        if c.dim() == 1:
            c = c[None]
        self._codes = c if self._codes is None else torch.cat([self._codes, c])
        ready = self._start + self._codes.shape[0] - self.lookahead
        return self._synth(ready) if ready > self._emitted else torch.zeros(0)

    def flush(self) -> torch.Tensor:
        if self._codes is None:
            return torch.zeros(0)
        end = self._start + self._codes.shape[0]
        out = self._synth(end) if end > self._emitted else torch.zeros(0)
        self.reset()
        return out
