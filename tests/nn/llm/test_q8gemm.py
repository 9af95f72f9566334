"""kernels/q8gemm against its pure-PyTorch reference; batch invariance; the fallback."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from voicepipe.nn import kernels
from voicepipe.nn.llm import qlinear


def _reference():
    path = kernels.KERNELS_DIR / "q8gemm" / "reference.py"
    spec = importlib.util.spec_from_file_location("q8gemm_reference", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.q8_gemm


@pytest.fixture(scope="module")
def q8():
    op = qlinear.q8gemm()
    if op is None:
        pytest.skip("q8gemm not built here (neither AVX2 nor AVX-512, or no compiler)")
    return op


@pytest.mark.parametrize("n,k", [(192, 576), (1536, 576), (576, 1536), (1000, 64)])
def test_matches_reference_and_is_batch_invariant(q8, n, k) -> None:
    g = torch.Generator().manual_seed(n + k)
    w = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
    scale = torch.rand(n, generator=g) * 0.01
    ref = _reference()
    for m in (1, 2, 5, 8, 9, 13):
        x = torch.randn(m, k, generator=g)
        y = q8(x, w, scale)
        assert torch.allclose(y, ref(x, w, scale), rtol=1e-4, atol=1e-4)
        rows = torch.cat([q8(x[i : i + 1].contiguous(), w, scale) for i in range(m)])
        assert torch.equal(y, rows)  # row i never depends on the other rows


def test_rejects_bad_shapes(q8) -> None:
    w = torch.zeros(4, 48, dtype=torch.int8)
    with pytest.raises(ValueError, match="multiple of 32"):
        q8(torch.zeros(1, 48), w, torch.ones(4))  # K not a multiple of 32
    with pytest.raises(ValueError, match="float32"):
        q8(
            torch.zeros(1, 64, dtype=torch.bfloat16),
            torch.zeros(4, 64, dtype=torch.int8),
            torch.ones(4),
        )


def test_linear_int8_kernel_and_fallback_agree() -> None:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(96, 64, generator=g) * 0.05
    x = torch.randn(3, 64, generator=g)
    fast = qlinear.Linear(w, None, "int8")
    aten = qlinear.Linear(w, None, "int8", kernels=False)
    exact = x @ fast.dequantized().T
    y_fast = fast(x.to(qlinear.act_dtype("int8"))).float()
    y_aten = aten(x.bfloat16()).float()
    assert torch.allclose(y_fast, exact, atol=2e-2)
    assert torch.allclose(y_aten, exact, atol=5e-2)  # bf16 activations


def test_a_stale_build_lock_is_removed_and_a_fresh_one_kept(tmp_path) -> None:
    import os
    import time
    import warnings

    from voicepipe.nn import kernels

    lock = tmp_path / "lock"
    lock.touch()
    kernels._clear_stale_lock(lock)  # another process is building right now: wait for it
    assert lock.exists()
    old = time.time() - kernels.STALE_LOCK_S - 60
    os.utime(lock, (old, old))  # left by a build that was killed
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        kernels._clear_stale_lock(lock)
    assert not lock.exists() and "stale kernel build lock" in str(w[0].message)
    kernels._clear_stale_lock(lock)  # no lock: nothing to do
    # The lock looked at is the one torch takes: in the folder the built module sits in.
    mod = kernels.llama_step()
    if mod is not None:
        assert kernels.build_dir(mod.__name__) == Path(mod.__file__).parent
