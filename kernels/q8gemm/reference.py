"""Pure-PyTorch reference of q8gemm.cpp: y (M, N) = x (M, K) · (w (N, K) int8 · scale (N))ᵀ."""

from __future__ import annotations

import torch


def q8_gemm(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x.float() @ (w.float() * scale.float()[:, None]).T
