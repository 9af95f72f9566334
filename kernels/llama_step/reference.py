"""Pure-PyTorch reference of the fused step's matrix kernels (q8a8.h, q4a8.h).

Both quantize each activation row per 32 values (symmetric int8, round half to
even) and multiply exactly in integers; only the float accumulation order
differs from the C++ kernels. The whole-model reference is
``voicepipe.nn.llama.forward``'s per-op path.
"""

from __future__ import annotations

import torch

BLOCK = 32


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (M, K) fp32 → q (M, K/32, 32) int values as float64, s (M, K/32) block scales."""
    m, k = x.shape
    g = x.float().reshape(m, k // BLOCK, BLOCK)
    amax = g.abs().amax(dim=-1)
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    q = torch.round(g * inv[..., None]).clamp(-128, 127)
    return q.double(), (amax / 127.0).double()


def q8a8_gemm(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """y (M, N) = dequant(quantize(x)) · (w (N, K) int8 · scale (N))ᵀ."""
    q, s = quantize_rows(x)
    n, k = w.shape
    wg = w.double().reshape(n, k // BLOCK, BLOCK)
    dots = torch.einsum("mbk,nbk->mnb", q, wg)  # exact integers
    return (torch.einsum("mnb,mb->mn", dots, s) * scale.double()).float()


def q4a8_gemm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y (M, N) = dequant(quantize(x)) · wᵀ for w the fp32 weight a Q4_1 pack stands for."""
    q, s = quantize_rows(x)
    n, k = w.shape
    wg = w.double().reshape(n, k // BLOCK, BLOCK)
    return torch.einsum("mbk,nbk,mb->mn", q, wg, s).float()
