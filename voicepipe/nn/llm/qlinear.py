"""Linear layers in four weight formats for CPU decode (docs/DESIGN.md §2).

Decode of a small LLM is memory-bound: tokens/s ≈ kernel params/s / params
per token. Measured here on 2 threads, a large GEMV reads ~3.9 G params/s in
fp32, ~7.2 in bf16, ~25 with int8 weight-only and ~33 with int4 weight-only.

- fp32: F.linear, fp32 activations (the reference; matches transformers).
- bf16: F.linear on bf16 weights and activations.
- int8: per-output-channel symmetric int8, ``aten._weight_int8pack_mm``.
- int4: group-wise (32) asymmetric 4-bit, ``aten._weight_int4pack_mm_for_cpu``.
  Q4_1 GGUF blocks are exactly this shape (32 values, a scale and a min), so
  re-quantizing a dequantized Q4_1 tensor loses almost nothing.

The aten quantized kernels take bf16 activations (their fp32 paths are slow
fallbacks here), so int4 models compute in bf16. int8 prefers the project's
own kernel (kernels/q8gemm: fp32 activations, each weight row read once for
up to 8 rows, batch-invariant), built on first use; when it cannot be built
(no compiler, neither AVX-512 nor AVX2, VOICEPIPE_KERNELS=0) int8 falls back to aten's
kernel with bf16 activations.

Whole models do not call these per layer when the fused step
(kernels/llama_step, ``voicepipe.nn.llm.fused``) can run them: it reads int8
weights as they are and int4 weights in its own Q4_1-shaped packing
(``pack_q4``), which an int4 Linear builds instead of aten's when that kernel
builds here (AVX512-VNNI or AVX2; aten's only on a per-op call); such models then
compute in fp32.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from voicepipe.nn import kernels as kbuild

WEIGHT_FORMATS = ("fp32", "bf16", "int8", "int4")
INT4_GROUP = 32

_Q8: list[Callable[..., torch.Tensor] | None] = []  # [] = not tried yet


def q8gemm() -> Callable[..., torch.Tensor] | None:
    """The q8_gemm op (kernels/q8gemm, built once per machine), or None."""
    if not _Q8:
        lib = kbuild.q8gemm()
        _Q8.append(None if lib is None else _q8_op(lib.vp_q8_gemm))
    return _Q8[0]


def _q8_op(fn: Callable[..., None]) -> Callable[..., torch.Tensor]:
    f32, i8 = torch.float32, torch.int8

    def q8_gemm(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """y (M, N) = x (M, K) fp32 · (w (N, K) int8 · scale (N,) fp32)ᵀ, K % 32 == 0."""
        # Per layer and token on the per-op path: the common case in one expression of
        # cheap attribute reads (~3 µs); kbuild.check's error-naming pass only when it fails.
        if not (
            x.dtype == f32 and w.dtype == i8 and scale.dtype == f32
            and x.dim() == 2 and w.dim() == 2 and scale.dim() == 1
            and x.shape[1] == w.shape[1] and scale.shape[0] == w.shape[0]
            and w.shape[1] % 32 == 0
            and x.is_contiguous() and w.is_contiguous() and scale.is_contiguous()
            and x.is_cpu and w.is_cpu and scale.is_cpu
        ):  # fmt: skip
            _q8_refuse(x, w, scale)
        m, (n, k) = x.shape[0], w.shape
        y = torch.empty(m, n)
        fn(x.data_ptr(), w.data_ptr(), scale.data_ptr(), y.data_ptr(), m, k, n,
           torch.get_num_threads())  # fmt: skip
        return y

    return q8_gemm


def _q8_refuse(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> None:
    """KernelArgumentError naming what of q8_gemm's arguments is wrong."""
    kbuild.check(w, "q8_gemm's w", torch.int8, (None, None))
    n, k = w.shape
    kbuild.check(x, "q8_gemm's x", torch.float32, (None, k))
    kbuild.check(scale, "q8_gemm's scale", torch.float32, (n,))
    raise kbuild.KernelArgumentError(f"q8_gemm needs K a multiple of 32, got {k}")


def pack_kernel() -> Callable[[torch.Tensor], list[torch.Tensor]] | None:
    """The compiled ``pack_q4`` (kernels/pack), or None: ``pack_q4_reference`` then."""
    lib = kbuild.pack()
    return None if lib is None else _pack_op(lib.vp_pack_q4)


def _pack_op(fn: Callable[..., None]) -> Callable[[torch.Tensor], list[torch.Tensor]]:
    def pack_q4(w: torch.Tensor) -> list[torch.Tensor]:
        """fp32 (out, in) → the fused step's int4 nibbles, d, m (``pack_q4_reference``'s
        layout); in % 32 == 0."""
        kbuild.check(w, "pack_q4's w", torch.float32, (None, None))
        n, k = w.shape
        if k % INT4_GROUP:
            raise kbuild.KernelArgumentError(f"pack_q4 needs in_features divisible by 32, got {k}")
        nb, ng = k // INT4_GROUP, (n + 15) // 16
        nib = torch.zeros(ng, nb, 256, dtype=torch.uint8)  # zeros: the kernel ORs nibbles in
        d = torch.empty(n, nb)
        m = torch.zeros(ng, nb, 16, dtype=torch.float16)  # padded outputs keep zeros
        fn(w.data_ptr(), n, k, nib.data_ptr(), d.data_ptr(), m.data_ptr(),
           torch.get_num_threads())  # fmt: skip
        return [nib, d, m]

    return pack_q4


def q4_kernel() -> bool:
    """Int4 matrices take the fused llama step's Q4_1-shaped layout here: the step is
    built, or will be (AVX-512 VNNI or AVX2, a compiler). It is not waited for: packing
    runs while it compiles, and the model waits for it when it builds its fused step."""
    return kbuild.fused_expected()


def act_dtype(weights: str, kernels: bool = True) -> torch.dtype:
    if weights == "fp32" or (weights == "int8" and kernels and q8gemm() is not None):
        return torch.float32
    if weights == "int4" and kernels and q4_kernel():
        return torch.float32  # the fused step's activations; aten's int4 path casts
    return torch.bfloat16


class Linear:
    """y = x @ W.T (+ b) for x (T, in) → (T, out), in one of WEIGHT_FORMATS."""

    def __init__(
        self, w: torch.Tensor, b: torch.Tensor | None, weights: str, kernels: bool = True
    ) -> None:
        if weights not in WEIGHT_FORMATS:
            raise ValueError(f"unknown weight format {weights!r} (choose from {WEIGHT_FORMATS})")
        w = w.float().contiguous()  # (out, in)
        self.weights = weights
        self.out_features, self.in_features = w.shape
        dt = act_dtype(weights, kernels)
        self.q8 = q8gemm() if weights == "int8" and kernels else None
        self.bias = None if b is None else b.to(dt).contiguous()
        if weights == "fp32":
            self.w = w
        elif weights == "bf16":
            self.w = w.to(torch.bfloat16)
        elif weights == "int8":
            scale = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-10)  # (out,)
            self.w = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
            self.scale = scale.to(dt)
        elif self.in_features % INT4_GROUP:
            raise ValueError(f"int4 needs in_features divisible by {INT4_GROUP}")
        # The fused step's own int4 layout (kernels/llama_step/q4a8.h). aten's
        # packing is then only built if a per-op caller (a test, a per-op draft)
        # asks for it: a model on the fused step never does, and building it
        # cost load time and a second copy of the weights (~0.5 byte each).
        self.q4: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        if weights == "int4" and kernels and q4_kernel():
            self.q4 = pack_q4(w)
        elif weights == "int4":
            self.w, self.scales_zeros = quantize_int4(w, INT4_GROUP)
        # The kernel is bound once so the decode loop calls one closure per layer.
        self.fn: Callable[[torch.Tensor], torch.Tensor] = (
            self._first_call if self.q4 is not None else self._pick()
        )

    # What ``state`` saves and ``from_state`` restores: every packed tensor a format
    # has (int4's aten packing only if it was built), nothing derived from them.
    _STATE = ("w", "scale", "scales_zeros", "bias")

    def state(self) -> dict[str, torch.Tensor]:
        """The packed tensors, for the on-disk cache of packed weights (voicepipe.nn.llm.packed)."""
        out = {k: getattr(self, k) for k in self._STATE if getattr(self, k, None) is not None}
        if self.q4 is not None:
            out["q4.nib"], out["q4.d"], out["q4.m"] = self.q4
        return out

    @classmethod
    def from_state(
        cls,
        st: dict[str, torch.Tensor],
        shape: tuple[int, int],
        weights: str,
        kernels: bool = True,
    ) -> Linear:
        """The Linear ``state()`` was taken from, without re-quantizing: the same tensors
        (e.g. memory-mapped from the cache file), packed on the same machine set-up."""
        self = cls.__new__(cls)
        self.weights = weights
        self.out_features, self.in_features = shape
        self.q8 = q8gemm() if weights == "int8" and kernels else None
        self.bias = None
        for k in cls._STATE:
            if k in st:
                setattr(self, k, st[k])
        self.q4 = (st["q4.nib"], st["q4.d"], st["q4.m"]) if "q4.nib" in st else None
        self.fn = self._first_call if self.q4 is not None else self._pick()
        return self

    def _aten_int4(self) -> None:
        """Build aten's int4 packing once, from the q4 pack (its groups are the same 4-bit grid)."""
        if not hasattr(self, "scales_zeros"):
            assert self.q4 is not None
            self.w, self.scales_zeros = quantize_int4(unpack_q4(*self.q4), INT4_GROUP)

    def _first_call(self, x: torch.Tensor) -> torch.Tensor:
        self._aten_int4()
        self.fn = self._pick()
        return self.fn(x)

    def _pick(self) -> Callable[[torch.Tensor], torch.Tensor]:
        b = self.bias
        if self.weights in ("fp32", "bf16"):
            w = self.w
            return lambda x: F.linear(x, w, b)
        if self.q8 is not None and self.in_features % 32 == 0:
            w, s, q8 = self.w, self.scale, self.q8
            if b is None:
                return lambda x: q8(x, w, s)
            return lambda x: q8(x, w, s) + b
        if self.weights == "int8":
            w, s = self.w, self.scale.to(torch.bfloat16)
            mm = torch.ops.aten._weight_int8pack_mm
            if b is None:
                return lambda x: mm(x, w, s)
            return lambda x: mm(x, w, s) + b
        if self.q4 is not None:
            self._aten_int4()
        w, sz = self.w, self.scales_zeros
        mm4 = torch.ops.aten._weight_int4pack_mm_for_cpu
        bf = torch.bfloat16
        if b is None:
            return lambda x: mm4(x.to(bf), w, INT4_GROUP, sz).to(x.dtype)
        return lambda x: mm4(x.to(bf), w, INT4_GROUP, sz).to(x.dtype) + b

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)

    def dequantized(self) -> torch.Tensor:
        """The effective fp32 weight (out, in), for tests and the draft model."""
        if self.weights in ("fp32", "bf16"):
            return self.w.float()
        if self.weights == "int8":
            return self.w.float() * self.scale.float()[:, None]
        if self.q4 is not None:
            self._aten_int4()
        eye = torch.eye(self.in_features, dtype=torch.bfloat16)
        return (
            torch.ops.aten._weight_int4pack_mm_for_cpu(eye, self.w, INT4_GROUP, self.scales_zeros)
            .float()
            .T.contiguous()
        )


def quantize_int4(w: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-wise asymmetric 4-bit: w ≈ (q - 8) * scale + zero, q in 0..15.

    Returns the packed weight for the CPU kernel and scales_and_zeros
    (in/group, out, 2) in bf16.
    """
    n, k = w.shape
    g = w.reshape(n, k // group, group)
    lo = g.amin(dim=-1, keepdim=True)
    hi = g.amax(dim=-1, keepdim=True)
    scale = ((hi - lo) / 15.0).clamp(min=1e-10)
    q = torch.round((g - lo) / scale).clamp(0, 15).to(torch.int32).reshape(n, k)
    zero = lo + 8.0 * scale
    sz = torch.stack([scale.squeeze(-1), zero.squeeze(-1)], dim=-1)  # (out, in/group, 2)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    return packed, sz.transpose(0, 1).contiguous().to(torch.bfloat16)


def pack_q4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``pack_q4_reference``'s result, from the C++ kernel where it builds (bit-identical,
    one pass over the weights instead of a dozen: most of a first load's packing time)."""
    fn = pack_kernel()
    if fn is None or w.shape[1] % 32:
        return pack_q4_reference(w)
    nib, d, mt = fn(w.float().contiguous())
    return nib, d, mt


def pack_q4_reference(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GGUF Q4_1-shaped int4: per 32 inputs w ≈ d·q + m, q in 0..15, d and m fp16-valued.

    Returns the fused step's layout (kernels/llama_step/q4a8.h): nibbles
    (ceil(out/16), in/32, 256) uint8, d (out, in/32) fp32, m (ceil(out/16),
    in/32, 16) fp16. Outputs go in groups of 16 (zero-padded); per group and
    block, weight byte kq·64 + 4·r + i is output r's input 4·kq + i of the
    block, and nibble byte j holds weight bytes j (low) and 256 + j (high).
    Dequantized Q4_1 tensors round-trip exactly: their blocks' min and range
    are the original m and 15·d.
    """
    n, k = w.shape
    if k % 32:
        raise ValueError("pack_q4 needs in_features divisible by 32")
    nb, ng = k // 32, (n + 15) // 16
    g = w.float().reshape(n, nb, 32)
    lo = g.amin(dim=-1)
    d = ((g.amax(dim=-1) - lo) / 15.0).half()
    m = lo.half()
    df = d.float()[..., None]
    q = torch.where(df > 0, (g - m.float()[..., None]) / df.clamp(min=1e-30), 0.0)
    q = q.round().clamp(0, 15).to(torch.uint8)
    qp = torch.zeros(ng * 16, nb, 32, dtype=torch.uint8)
    qp[:n] = q
    # (group, row r, block, quad kq, i) → (group, block, kq, r, i)
    tiles = qp.reshape(ng, 16, nb, 8, 4).permute(0, 2, 3, 1, 4).reshape(ng, nb, 512)
    nib = tiles[..., :256] | (tiles[..., 256:] << 4)
    mt = torch.zeros(ng * 16, nb, dtype=torch.float16)
    mt[:n] = m
    mt = mt.reshape(ng, 16, nb).transpose(1, 2).contiguous()
    return nib.contiguous(), d.float().contiguous(), mt


def unpack_q4(nib: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """The fp32 weight (out, in) that pack_q4's output stands for."""
    ng, nb, _ = nib.shape
    n = d.shape[0]
    tiles = torch.cat([nib & 0x0F, nib >> 4], dim=-1)  # (ng, nb, 512)
    q = tiles.reshape(ng, nb, 8, 16, 4).permute(0, 3, 1, 2, 4).reshape(ng * 16, nb, 32)[:n]
    mins = m.transpose(1, 2).reshape(ng * 16, nb)[:n].float()
    return (q.float() * d.float()[..., None] + mins[..., None]).reshape(n, nb * 32)
