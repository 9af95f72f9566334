"""kernels/pack's int4 packing is pack_q4_reference's, bit for bit."""

from __future__ import annotations

import pytest
import torch

from voicepipe.nn import kernels
from voicepipe.nn.llm.qlinear import pack_kernel, pack_q4, pack_q4_reference, unpack_q4

pytestmark = pytest.mark.skipif(not kernels.enabled(), reason="no C++ kernels on this CPU")


def _weights(n: int, k: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g) * torch.rand(n, 1, generator=g) * 3
    w[0, :32] = 0.25  # a constant block: d = 0, every q 0
    w[-1, -32:] *= 1e4  # a wide block
    if k >= 64:
        w[n // 2, 32:64] = torch.linspace(-1, 1, 32)  # values on rounding ties of the step
    return w


@pytest.mark.parametrize("shape", [(16, 32), (37, 64), (100, 1536), (1, 96)])
def test_kernel_packs_like_the_reference(shape: tuple[int, int]) -> None:
    assert pack_kernel() is not None
    w = _weights(*shape, seed=sum(shape))
    want = pack_q4_reference(w)
    got = pack_q4(w)
    for a, b, what in zip(got, want, ("nibbles", "d", "m"), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, what
        assert torch.equal(a, b), what


def test_packed_weights_stand_for_the_weights() -> None:
    w = _weights(48, 128, seed=3)
    back = unpack_q4(*pack_q4(w))
    step = (w.reshape(48, 4, 32).amax(-1) - w.reshape(48, 4, 32).amin(-1)) / 15
    assert ((back - w).abs().reshape(48, 4, 32) <= step[..., None] * 0.51 + 1e-3).all()
