"""Widening a trained draft's FFN: same predictions at first, the target's next channels added."""

from __future__ import annotations

import pytest
import torch


def _draft(ffn_dim: int):
    from voicepipe.nn.llm.draft_model import DraftArgs, EagleDraft

    a = DraftArgs(dim=32, n_head=4, n_kv_head=2, head_dim=8, ffn_dim=ffn_dim, n_layer=1,
                  rope_base=10000.0, target_vocab=50, attn_bias=True)  # fmt: skip
    return EagleDraft(a, torch.arange(10))


def test_widened_draft_predicts_what_the_narrow_one_did() -> None:
    from voicepipe.training.draft_ffn import ffn_channels, widen_ffn

    torch.manual_seed(0)
    f = 40  # the target layer's channels
    w13, w2 = torch.randn(2 * f, 32), torch.randn(32, f)
    narrow = _draft(16)
    with torch.no_grad():
        for p in narrow.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # a trained draft: not the target's channels
    wide = _draft(24)
    sd = widen_ffn(narrow.state_dict(), w13, w2, 24)
    wide.load_state_dict(sd)
    feats, nxt = torch.randn(2, 5, 32), torch.randn(2, 5, 32)
    with torch.no_grad():
        assert torch.allclose(narrow(feats, nxt), wide(feats, nxt), atol=1e-5)
    ly, old = wide.layers[0], narrow.layers[0]
    assert torch.equal(ly.w13.weight[:16], old.w13.weight[:16])  # trained gates kept
    assert torch.equal(ly.w13.weight[24:40], old.w13.weight[16:])  # trained ups kept
    # the new channels are the target's ranked 17th to 24th, gate and up
    new = sorted(set(ffn_channels(w13, w2, 24).tolist()) - set(ffn_channels(w13, w2, 16).tolist()))
    assert len(new) == 8
    assert torch.equal(ly.w13.weight[16:24], w13[:f][new])
    assert torch.equal(ly.w13.weight[40:], w13[f:][new])
    assert ly.w2.weight[:, 16:].abs().sum() == 0 and ly.w2.weight[:, :16].abs().sum() > 0


def test_widening_refuses_a_narrower_or_too_wide_ffn() -> None:
    from voicepipe.training.draft_ffn import widen_ffn

    sd = _draft(16).state_dict()
    w13, w2 = torch.randn(2 * 20, 32), torch.randn(32, 20)
    with pytest.raises(ValueError, match="widen only"):
        widen_ffn(sd, w13, w2, 12)
    with pytest.raises(ValueError, match="only 20 channels"):
        widen_ffn(sd, w13, w2, 24)
