"""The fused kernel's weight rounding in the training graph, with straight-through gradients.

The draft runs on the fused step with an int4 layer and an int8 ``fc``
(``draft_spec.FusedDraft``); trained in float, it loses 0.02–0.03 of
first-position agreement to that rounding. Training through these functions
lets the weights settle where the rounded ones predict well. Forward values
equal what the kernel's packing stands for (``unpack_q4(*pack_q4(w))`` and
``Linear(w, None, "int8")``); gradients pass through unchanged (STE).
"""

from __future__ import annotations

import torch


def q4_1(w: torch.Tensor) -> torch.Tensor:
    """Q4_1-shaped int4 (per 32 inputs: min m and step d, both fp16-valued), as ``pack_q4``."""
    n, k = w.shape
    g = w.float().reshape(n, k // 32, 32)
    lo = g.amin(dim=-1, keepdim=True)
    d = ((g.amax(dim=-1, keepdim=True) - lo) / 15.0).half().float()
    m = lo.half().float()
    q = torch.where(d > 0, (g - m) / d.clamp(min=1e-30), 0.0).round().clamp(0, 15)
    return (q * d + m).reshape(n, k)


def int8_rows(w: torch.Tensor) -> torch.Tensor:
    """Symmetric per-row int8 (scale = absmax / 127), as ``Linear(w, None, "int8")``."""
    scale = (w.float().abs().amax(dim=1, keepdim=True) / 127.0).clamp(min=1e-10)
    return torch.round(w.float() / scale).clamp(-127, 127) * scale


def ste(w: torch.Tensor, rounded: torch.Tensor) -> torch.Tensor:
    """``rounded`` forward, identity backward: the gradient reaches ``w`` as if unrounded."""
    return w + (rounded - w).detach()


def draft_rounding(name: str, w: torch.Tensor) -> torch.Tensor | None:
    """What ``FusedDraft`` runs in place of an ``EagleDraft`` parameter, or None if it
    runs it as is: the layer's matrices as Q4_1 int4, ``fc`` as per-row int8."""
    if name.startswith("layers.") and name.endswith(".weight"):
        return q4_1(w)
    if name == "fc.weight":
        return int8_rows(w)
    return None
