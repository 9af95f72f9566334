"""A draft layer's FFN channels: which of the target's to keep, and widening a trained one.

``ffn_channels`` ranks the target's last layer's channels: a draft narrower than
that layer starts from the ones that carry the most. ``widen_ffn``: a fine-tune
that starts from a trained draft (``train draft --init``) with a wider
``--ffn-dim`` keeps every trained channel and adds the target's next-ranked ones
(the draft's first fit kept the top-ranked). The new channels' down columns
start at zero, so the widened draft predicts exactly what the trained one did at
step 0, and the fit then grows them: more capacity without throwing away what
the narrow draft learned.
"""

from __future__ import annotations

import torch


def channel_ranks(w13: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """A SwiGLU layer's FFN channels, the ones that move the most first.

    w13 (2f, dim) gate ‖ up, w2 (dim, f). A channel's output is bounded by its
    gate and up rows' norms times its down column's norm.
    """
    f = w2.shape[1]
    score = w13[:f].norm(dim=1) * w13[f:].norm(dim=1) * w2.norm(dim=0)
    return torch.argsort(score, descending=True, stable=True)


def ffn_channels(w13: torch.Tensor, w2: torch.Tensor, n: int) -> torch.Tensor:
    """The n FFN channels (ascending) that move the most: a draft narrower than the
    target's layer starts from the channels that carry the most of it."""
    return torch.sort(channel_ranks(w13, w2)[:n]).values


def widen_ffn(
    state: dict[str, torch.Tensor], w13: torch.Tensor, w2: torch.Tensor, want: int, layer: int = 0
) -> dict[str, torch.Tensor]:
    """``state`` (an EagleDraft state dict) with layer ``layer``'s FFN widened to ``want``.

    w13 (2f, dim) gate ‖ up and w2 (dim, f) are the target's layer the draft started from.
    The draft's w13 is [gate ; up] of its width h; the result is [gate, new gate ; up, new
    up] and w2 gains zero columns for the new channels.
    """
    k13, k2 = f"layers.{layer}.w13.weight", f"layers.{layer}.w2.weight"
    d13, d2 = state[k13], state[k2]
    have, f = d2.shape[1], w2.shape[1]
    if want <= have:
        raise ValueError(f"--ffn-dim {want}: the draft is already {have} wide; widen only")
    if want > f:
        raise ValueError(f"--ffn-dim {want}: the target's layer has only {f} channels")
    new = torch.sort(channel_ranks(w13, w2)[have:want]).values  # ranked have+1 … want
    gate, up = d13[:have], d13[have:]
    out = dict(state)
    out[k13] = torch.cat([gate, w13[:f][new].to(d13), up, w13[f:][new].to(d13)])
    out[k2] = torch.cat([d2, torch.zeros(d2.shape[0], len(new), dtype=d2.dtype)], dim=1)
    return out
