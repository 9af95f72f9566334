"""Training-time rounding equals the kernel's packing, and lets gradients through."""

from __future__ import annotations

import copy

import torch

from voicepipe.nn.llm.draft_model import DraftArgs, EagleDraft
from voicepipe.nn.llm.fake_quant import int8_rows, q4_1, ste
from voicepipe.nn.llm.qlinear import Linear, pack_q4, unpack_q4


def test_q4_1_is_what_the_fused_kernels_packing_stands_for() -> None:
    torch.manual_seed(0)
    w = torch.randn(40, 96) * torch.rand(40, 1)  # rows of different scales, 3 blocks each
    w[3, :32] = 0.25  # a constant block: step 0
    assert torch.equal(q4_1(w), unpack_q4(*pack_q4(w)))
    assert not torch.equal(q4_1(w), w)


def test_int8_rows_is_the_int8_linears_weight() -> None:
    torch.manual_seed(1)
    w = torch.randn(24, 64)
    lin = Linear(w, None, "int8", kernels=False)
    ref = lin.w.float() * (w.abs().amax(dim=1) / 127.0)[:, None]
    assert torch.allclose(int8_rows(w), ref, rtol=0, atol=1e-7)
    # The Linear keeps its scale in its activation dtype; the weights agree to that rounding.
    assert torch.allclose(int8_rows(w), lin.dequantized(), rtol=1e-2, atol=1e-6)


def test_ste_rounds_forward_and_passes_gradients_through() -> None:
    w = torch.randn(8, 32, requires_grad=True)
    y = ste(w, q4_1(w))
    assert torch.allclose(y.detach(), q4_1(w.detach()), rtol=0, atol=1e-6)  # w + (r - w)
    (y * torch.arange(32.0)).sum().backward()
    assert torch.equal(w.grad, torch.arange(32.0).expand(8, 32))


def test_quantized_draft_runs_the_rounded_weights_and_trains_the_float_ones() -> None:
    from voicepipe.training.draft_fit import quantized

    a = DraftArgs(dim=64, n_head=4, n_kv_head=2, head_dim=16, ffn_dim=96, n_layer=1,
                  rope_base=10000.0, target_vocab=50)  # fmt: skip
    torch.manual_seed(2)
    m = EagleDraft(a, torch.arange(10))
    rounded = copy.deepcopy(m)
    with torch.no_grad():
        for name, p in rounded.named_parameters():
            if name.startswith("layers.") and name.endswith(".weight"):
                p.copy_(q4_1(p))
            elif name == "fc.weight":
                p.copy_(int8_rows(p))
    f, e = torch.randn(2, 5, 64), torch.randn(2, 5, 64)
    out = quantized(m, True)(f, e)
    assert torch.allclose(out, rounded(f, e), atol=1e-5)
    assert not torch.allclose(out, m(f, e), atol=1e-3)  # the rounding is really applied
    assert quantized(m, False) is m
    out.square().mean().backward()
    assert m.layers[0].wqkv.weight.grad is not None and m.fc.weight.grad is not None
    assert m.layers[0].wqkv.weight.grad.abs().sum() > 0
