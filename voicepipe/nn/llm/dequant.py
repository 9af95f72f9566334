"""GGUF block formats to fp32 in torch: the same numbers as the ``gguf`` package, faster.

``gguf.quants.dequantize`` works in numpy on groups of 16 rows at a time, on one
core: it was about a third of a 1.5B model's first load (the other thirds: the
GGUF reader's metadata parse and our own packing). Here each format is a few
whole-tensor torch ops, which run on every intra-op thread. The ops and their
order are gguf's (float32 products of the fp16 scales with the small integers,
then the subtraction of the min), so results are bit-identical to it
(tests/nn/llm/test_dequant.py compares both on random blocks and real tensors).
Formats not here fall back to the ``gguf`` package. Where the C++ kernels build, the
K-quants (most of a Q4_K_M model) go through kernels/pack instead: the same float
operations block by block in one pass, several times faster (``reference`` keeps the
torch path callable for the tests).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import torch

QK_K = 256  # values per K-quant super-block

# Bytes per block and values per block of the formats handled here, by GGML type name.
BLOCKS = {"Q4_1": (20, 32), "Q8_0": (34, 32), "Q4_K": (144, QK_K), "Q6_K": (210, QK_K)}


def _f16(b: torch.Tensor) -> torch.Tensor:
    """(n, 2) uint8 → (n, 1) float32: little-endian fp16 values."""
    return b.contiguous().view(torch.float16).float()


def _q4_1(b: torch.Tensor) -> torch.Tensor:
    d, m = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    qs = b[:, 4:]
    q = torch.cat([qs & 0x0F, qs >> 4], dim=1).float()  # low nibbles are values 0..15
    return d * q + m


def _q8_0(b: torch.Tensor) -> torch.Tensor:
    d = _f16(b[:, 0:2])
    return b[:, 2:].contiguous().view(torch.int8).float() * d


def _q4_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    s = b[:, 4:16].reshape(n, 3, 4)
    lo, hi, mix = s[:, 0], s[:, 1], s[:, 2]
    # 8 sub-blocks' 6-bit scales and mins: the first four in the low 6 bits of lo/hi,
    # the last four from mix's nibbles plus lo/hi's top two bits.
    sc = torch.cat([lo & 0x3F, (mix & 0x0F) | ((lo >> 2) & 0x30)], dim=1)
    mn = torch.cat([hi & 0x3F, (mix >> 4) | ((hi >> 2) & 0x30)], dim=1)
    dl = (d * sc.float()).reshape(n, 8, 1)
    ml = (dmin * mn.float()).reshape(n, 8, 1)
    qs = b[:, 16:].reshape(n, 4, 1, 32)
    q = torch.cat([qs & 0x0F, qs >> 4], dim=2).reshape(n, 8, 32).float()
    return (dl * q - ml).reshape(n, QK_K)


def _q6_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    ql = b[:, 0:128].reshape(n, 2, 1, 64)
    qh = b[:, 128:192].reshape(n, 2, 1, 32)
    scales = b[:, 192:208].contiguous().view(torch.int8).float()
    d = (_f16(b[:, 208:210]) * scales).reshape(n, 16, 1)
    lo = torch.cat([ql & 0x0F, ql >> 4], dim=2).reshape(n, 2, 4, 32)
    hi = torch.cat([(qh >> s) & 0x03 for s in (0, 2, 4, 6)], dim=2).reshape(n, 2, 4, 32)
    q = (lo | (hi << 4)).to(torch.int8) - 32
    return (d * q.reshape(n, 16, 16).float()).reshape(n, QK_K)


_FN = {"Q4_1": _q4_1, "Q8_0": _q8_0, "Q4_K": _q4_k, "Q6_K": _q6_k}


def dequantize(data: np.ndarray, type_name: str) -> torch.Tensor | None:
    """A GGUF tensor's raw blocks (uint8, any shape) → flat fp32 values, or None when
    ``type_name`` is not handled here (the caller then asks the gguf package)."""
    if type_name not in _FN:
        return None
    size, _ = BLOCKS[type_name]
    flat = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    with warnings.catch_warnings():  # a read-only memory map: only read here, never written
        warnings.simplefilter("ignore", UserWarning)
        raw = torch.from_numpy(flat)
    if raw.numel() % size:
        raise ValueError(f"{type_name}: {raw.numel()} bytes is not a whole number of blocks")
    fast = _kernel(type_name)
    if fast is not None:
        return fast(raw)
    return _FN[type_name](raw.reshape(-1, size)).reshape(-1)


def reference(data: np.ndarray, type_name: str) -> torch.Tensor | None:
    """``dequantize`` by the torch code above alone (what the C++ kernel is tested against)."""
    if type_name not in _FN:
        return None
    size, _ = BLOCKS[type_name]
    raw = torch.from_numpy(np.ascontiguousarray(data).view(np.uint8).reshape(-1).copy())
    return _FN[type_name](raw.reshape(-1, size)).reshape(-1)


def _kernel(type_name: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """kernels/pack's one-pass dequantization of the K-quants (bit-identical), or None."""
    if type_name not in ("Q4_K", "Q6_K"):
        return None
    from voicepipe.nn import kernels

    lib = kernels.pack()
    if lib is None:
        return None
    size, per = BLOCKS[type_name]
    fn = lib.vp_dequant_q4_k if type_name == "Q4_K" else lib.vp_dequant_q6_k

    def dequant(raw: torch.Tensor) -> torch.Tensor:
        kernels.check(raw, f"{type_name} blocks", torch.uint8, (None,))
        if raw.numel() % size:
            raise kernels.KernelArgumentError(
                f"{type_name}: {raw.numel()} bytes is not a whole number of blocks"
            )
        n = raw.numel() // size
        y = torch.empty(n * per)
        fn(raw.data_ptr(), n, y.data_ptr(), torch.get_num_threads())
        return y

    return dequant
