"""Glue between ``llama.Transformer`` and the fused C++ forward (kernels/llama_step).

The fused forward runs a whole decode / verify / prefill step in one call:
the same model as ``llama.forward``'s per-op path (its reference), without
~600 op dispatches per token. Its matrices are int8 (row scales) or Q4_1-shaped
int4, multiplied with int8-quantized activations (AVX512-VNNI or AVX2). A
model keeps the per-op path when any matrix lacks a kernel layout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from voicepipe.nn import kernels

if TYPE_CHECKING:
    from voicepipe.nn.llm.llama import Transformer
    from voicepipe.nn.llm.qlinear import Linear


def matrix(lin: Linear) -> list[torch.Tensor] | None:
    """The kernel's form of a Linear: [w, scale] (int8) or [nibbles, d, m] (int4), or None."""
    if lin.weights == "int8" and lin.q8 is not None and lin.in_features % 32 == 0:
        return [lin.w, lin.scale]
    if lin.weights == "int4" and lin.q4 is not None:
        return list(lin.q4)
    return None


def build_for(m: Transformer) -> Any | None:
    """A fused forward over m's weights (shared, not copied), or None when m cannot use one."""
    if m.dtype != torch.float32 or m.args.head_dim % 64:
        return None
    mats = [[matrix(x) for x in (ly.wqkv, ly.wo, ly.w13, ly.w2)] for ly in m.layers]
    head = matrix(m.output)
    if head is None or any(x is None for row in mats for x in row):
        return None
    mod = kernels.llama_step()
    if mod is None:
        return None
    empty = torch.empty(0)
    norms = [
        [
            ly.attn_norm.contiguous(),
            ly.ffn_norm.contiguous(),
            empty if ly.wqkv.bias is None else ly.wqkv.bias.float().contiguous(),
        ]
        for ly in m.layers
    ]
    return mod.Model(
        m.args.n_head,
        m.args.n_kv_head,
        m.args.head_dim,
        float(m.args.norm_eps),
        m.embed.contiguous(),
        m.norm.contiguous(),
        m.freqs.real.contiguous(),
        m.freqs.imag.contiguous(),
        norms,
        mats,
        head,
    )
