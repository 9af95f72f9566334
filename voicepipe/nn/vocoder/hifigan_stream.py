"""Exact streaming HiFi-GAN with cached conv state: no overlap, no recomputed context.

``StreamingVocoder`` (hifigan.py) re-synthesizes ``left`` frames of context on
every call; with 8-step chunks that is 1.75× the work of whole-utterance
decoding. Here every convolution of ``FastGenerator`` keeps the last
``dilation · (k − 1)`` samples of its own input between calls and runs as a
"valid" convolution over [cached samples | new samples], so each output
sample is computed exactly once. A layer's zero padding becomes an initial
state of ``left pad`` zeros and, at ``flush``, ``right pad`` zeros appended
after the layer's last real input: the same arithmetic as the whole-utterance
pass, so chunked output equals it up to float rounding (tested).

Residual branches delay their input by the branch's total padding; the skip
path goes through a FIFO of the same length, and the three parallel resblocks
(kernels 3, 7, 11: different delays) are summed through one FIFO each. The
end-to-end delay is 3,405 samples, 13.3 mel frames (conv_pre 3 frames, the
first resblock level 7.5, the upsampling convs and the faster levels the
rest), so a push of 16 mel frames (4 codec steps) already yields audio.

Two CPU details measured on this machine (docs/BENCHMARKS.md):
- oneDNN builds a conv primitive for every new input width; for bf16 (AMX
  brgconv) the first call at a width costs several times a steady one. Feed
  pushes of a few fixed sizes (the TTS pushes whole chunks and splits the
  remainder into powers of two) so steady state hits the primitive cache.
- Eager ``conv2d`` reorders the weights into oneDNN's blocked layout on every
  call (~8 ms per full pass for 14 M bf16 weights, the same for a short chunk
  as for a long one). Weights are prepacked once here with
  ``torch.ops.mkldnn`` where available (checked against ``F.conv2d`` at build
  time; plain ``conv2d`` otherwise), and the leaky ReLU after conv_pre and
  after each resblock's first conv is fused into the conv.

The plan (prepacked weights) is built once per generator and shared by every
stream; a stream's state is only its buffers, so sessions share the weights.
"""

from __future__ import annotations

import threading
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from voicepipe.nn.vocoder.hifigan import LRELU_SLOPE, FastGenerator, Polyphase

_CL = torch.channels_last


def _width(x: Tensor) -> int:
    return x.shape[3]


class _Conv:
    """One (1, k) conv of FastGenerator as a valid conv; ``post_slope`` fuses a leaky ReLU."""

    def __init__(
        self, conv: nn.Conv2d, lpad: int, rpad: int, post_slope: float | None, pack: bool
    ) -> None:
        self.weight = conv.weight.detach()
        self.bias = conv.bias.detach() if conv.bias is not None else None
        self.dil = conv.dilation[1]
        self.ctx = self.dil * (conv.kernel_size[1] - 1)
        if lpad + rpad != self.ctx:
            raise ValueError(f"padding {lpad}+{rpad} does not match the kernel span {self.ctx}")
        self.lpad, self.rpad = lpad, rpad
        self.cin, self.cout = self.weight.shape[1], self.weight.shape[0]
        self.post_slope = post_slope
        self.packed: Tensor | None = None
        if pack:
            self._try_pack()

    def _try_pack(self) -> None:
        """Prepack for oneDNN; keep it only if it gives the plain conv's result."""
        try:
            ops = torch.ops.mkldnn
            g = torch.Generator().manual_seed(0)  # leave the global RNG alone
            x = torch.randn(1, self.cin, 1, self.ctx + 64, generator=g).to(self.weight.dtype)
            x = x.contiguous(memory_format=_CL)
            packed = ops._reorder_convolution_weight(
                self.weight, [0, 0], [1, 1], [1, self.dil], 1, [1, self.cin, 1, 1024]
            )
            self.packed = packed
            got = self(x).float()
            self.packed = None
            ref = self(x).float()
            tol = 1e-4 if self.weight.dtype == torch.float32 else 2e-2
            if torch.allclose(got, ref, atol=tol * max(1.0, float(ref.abs().max())), rtol=0):
                self.packed = packed
        except Exception:  # no oneDNN (or a build without these ops): plain conv2d
            self.packed = None

    def __call__(self, z: Tensor) -> Tensor:
        """Valid conv over z (1, Cin, 1, W ≥ ctx + 1) → (1, Cout, 1, W − ctx)."""
        if self.packed is not None:
            attr, scalars = (
                ("leaky_relu", [self.post_slope]) if self.post_slope is not None else ("none", [])
            )
            return torch.ops.mkldnn._convolution_pointwise(
                z, self.packed, self.bias, [0, 0], [1, 1], [1, self.dil], 1, attr, scalars, ""
            )
        y = F.conv2d(z, self.weight, self.bias, dilation=(1, self.dil))
        return F.leaky_relu_(y, self.post_slope) if self.post_slope is not None else y


class StreamPlan:
    """The generator's convs in streaming form (shared, read-only after construction)."""

    def __init__(self, gen: FastGenerator, pack: bool = True) -> None:
        self.dtype, self.nk = gen.dtype, gen.nk
        sym = lambda c: (c.padding[1], c.padding[1])  # noqa: E731 - symmetric "same" convs
        self.pre = _Conv(gen.conv_pre, *sym(gen.conv_pre), LRELU_SLOPE, pack)
        self.ups: list[tuple[_Conv, int, int]] = []
        for up in gen.ups:
            assert isinstance(up, Polyphase)
            lp, rp = up.pads
            self.ups.append((_Conv(up.conv, lp, rp, None, pack), up.s, up.cout))
        self.blocks = [
            [
                (_Conv(c1, *sym(c1), LRELU_SLOPE, pack), _Conv(c2, *sym(c2), None, pack))
                for c1, c2 in blk
            ]
            # (ModuleLists of [conv1, conv2] pairs: torch types their items as Module)
            for blk in cast("list[list[tuple[nn.Conv2d, nn.Conv2d]]]", gen.blocks)
        ]
        self.post = _Conv(gen.conv_post, *sym(gen.conv_post), None, pack)

    @property
    def packed(self) -> bool:
        return self.pre.packed is not None


_PLANS_LOCK = threading.Lock()


def plan_for(gen: FastGenerator) -> StreamPlan:
    """One plan per generator, built on first use (by whichever stream comes first)."""
    with _PLANS_LOCK:
        plan = gen.__dict__.get("_stream_plan")
        if plan is None:
            plan = StreamPlan(gen)
            gen.__dict__["_stream_plan"] = plan
        return plan


class GeneratorStream:
    """Per-stream state: each conv's cached input tail and each FIFO's pending samples."""

    def __init__(self, plan: StreamPlan) -> None:
        self.plan = plan
        self._buf: dict[int, Tensor] = {}
        self.mel_in = 0  # mel frames pushed
        self.samples_out = 0

    # -- primitives ----------------------------------------------------------------------
    def _conv(
        self, key: int, conv: _Conv, x: Tensor, final: bool, slope: float | None = None
    ) -> Tensor:
        """conv([cached tail | act(x) | right pad if final]); act = leaky ReLU(slope) or id.

        The activation writes straight into the conv's input buffer (one pass instead
        of an activation plus a concatenation)."""
        buf = self._buf.get(key)
        nb = conv.lpad if buf is None else _width(buf)  # fresh stream: left zero padding
        n, rp = _width(x), conv.rpad if final else 0
        z = torch.empty(1, x.shape[1], 1, nb + n + rp, dtype=x.dtype, memory_format=_CL)
        if buf is None:
            z[:, :, :, :nb].zero_()
        else:
            z[:, :, :, :nb].copy_(buf)
        if slope is None:
            z[:, :, :, nb : nb + n].copy_(x)
        else:
            torch._C._nn.leaky_relu(x, slope, out=z[:, :, :, nb : nb + n])
        if rp:
            z[:, :, :, nb + n :].zero_()
        w = _width(z)
        self._buf[key] = z[:, :, :, max(0, w - conv.ctx) :]
        if w <= conv.ctx:
            return x.new_zeros(1, conv.cout, 1, 0)
        return conv(z)

    def _take(self, key: int, y: Tensor, n: int) -> list[Tensor]:
        """FIFO: append y, pop the first n samples (as pieces, to avoid a copy)."""
        q = self._buf.get(key)
        nq = 0 if q is None else _width(q)
        if q is not None and nq >= n:  # short pushes only: the delay exceeds the chunk
            self._buf[key] = torch.cat([q[:, :, :, n:], y], dim=3)
            return [q[:, :, :, :n]]
        pieces = [q] if q is not None and nq else []
        pieces.append(y[:, :, :, : n - nq])
        self._buf[key] = y[:, :, :, n - nq :]
        return pieces

    def _pending(self, key: int) -> int:
        q = self._buf.get(key)
        return 0 if q is None else _width(q)

    @staticmethod
    def _into(dst: Tensor, pieces: list[Tensor], add: bool) -> Tensor:
        off = 0
        for piece in pieces:
            seg = dst[:, :, :, off : off + _width(piece)]
            seg.add_(piece) if add else seg.copy_(piece)
            off += _width(piece)
        return dst

    # -- the network ---------------------------------------------------------------------
    @torch.inference_mode()
    def step(self, mel: Tensor | None, final: bool = False) -> Tensor:
        """Push (80, n) mel frames (None: none); return the newly final float32 samples."""
        p = self.plan
        if mel is None:
            mel = torch.zeros(80, 0)
        self.mel_in += mel.shape[1]
        x = mel[None, :, None, :].to(p.dtype).contiguous(memory_format=_CL)
        key = 0
        x = self._conv(key, p.pre, x, final)  # its leaky ReLU is fused
        for i, (up, s, cout) in enumerate(p.ups):
            key += 1
            y = self._conv(key, up, x, final, None if i == 0 else LRELU_SLOPE)
            n = _width(y)  # (1, s·Cout, 1, n) phase-major → (1, Cout, 1, n·s)
            x = y.permute(0, 2, 3, 1).reshape(1, 1, n * s, cout).permute(0, 3, 1, 2)
            outs: list[tuple[int, Tensor]] = []
            for blk in p.blocks[i * p.nk : (i + 1) * p.nk]:
                y = x
                for c1, c2 in blk:
                    h = self._conv(key + 1, c1, y, final, LRELU_SLOPE)
                    t = self._conv(key + 2, c2, h, final)
                    self._into(t, self._take(key + 3, y, _width(t)), add=True)  # delayed skip
                    y, key = t, key + 3
                key += 1
                outs.append((key, y))
            # The three branches have different delays: sum what all of them have produced.
            m = min(self._pending(k) + _width(b) for k, b in outs)
            k0, b0 = outs[0]
            x = self._into(
                torch.empty(1, cout, 1, m, dtype=b0.dtype, memory_format=_CL),
                self._take(k0, b0, m),
                add=False,
            )
            for k, b in outs[1:]:
                self._into(x, self._take(k, b, m), add=True)
        key += 1
        x = self._conv(key, p.post, x, final, 0.01)[:, :1]  # slope 0.01 here, as trained
        out = torch.tanh(x.float()).reshape(-1)
        self.samples_out += out.numel()
        return out


class ExactStreamingVocoder:
    """Mel frames in → audio out, equal to whole-utterance synthesis; no recomputed context.

    Same surface as ``hifigan.StreamingVocoder``: ``push((80, n))`` returns the
    audio that is final so far (possibly empty), ``flush()`` the rest; the
    stream is reusable after ``flush``. Needs the vocoder's ``FastGenerator``.
    """

    def __init__(self, vocoder) -> None:  # vocoder: hifigan.Vocoder with fast=True
        if not isinstance(vocoder.model, FastGenerator):
            raise TypeError("exact streaming needs Vocoder(fast=True)")
        self.voc = vocoder
        self.plan = plan_for(vocoder.model)
        self.reset()

    def reset(self) -> None:
        self._s = GeneratorStream(self.plan)

    def push(self, mel: Tensor) -> Tensor:
        return self._s.step(mel)

    def flush(self) -> Tensor:
        if self._s.mel_in == 0:
            return torch.zeros(0)
        out = self._s.step(None, final=True)
        assert self._s.samples_out == self._s.mel_in * self.voc.hop
        self.reset()
        return out
