"""voicepipe.nn.kernels: the native (ctypes) kernels' argument checks, their build lock
across processes, and the fall-back when they cannot be built."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from voicepipe.nn import kernels
from voicepipe.nn.llm import dequant, qlinear

REPO = Path(__file__).resolve().parents[2]
needs_kernels = pytest.mark.skipif(not kernels.enabled(), reason="no C++ kernels on this CPU")


@needs_kernels
@pytest.mark.parametrize(
    "x,w,scale,says",
    [
        (torch.zeros(1, 64, dtype=torch.bfloat16), torch.zeros(4, 64, dtype=torch.int8),
         torch.ones(4), "x must be a contiguous CPU float32"),
        (torch.zeros(1, 64), torch.zeros(4, 64), torch.ones(4), "w must be a contiguous CPU int8"),
        (torch.zeros(1, 64), torch.zeros(64, 4, dtype=torch.int8).T, torch.ones(4),
         "not contiguous"),
        (torch.zeros(1, 32), torch.zeros(4, 64, dtype=torch.int8), torch.ones(4),
         r"x must be .* shape \(\?, 64\); got float32 \(1, 32\)"),
        (torch.zeros(1, 64), torch.zeros(4, 64, dtype=torch.int8), torch.ones(5),
         r"scale must be .* shape \(4\)"),
        (torch.zeros(2, 48), torch.zeros(4, 48, dtype=torch.int8), torch.ones(4),
         "multiple of 32"),
    ],
)  # fmt: skip
def test_q8gemm_refuses_what_it_cannot_take(x, w, scale, says) -> None:
    op = qlinear.q8gemm()
    assert op is not None
    with pytest.raises(kernels.KernelArgumentError, match=says):
        op(x, w, scale)


@needs_kernels
def test_pack_and_dequant_refuse_what_they_cannot_take() -> None:
    pack = qlinear.pack_kernel()
    assert pack is not None
    with pytest.raises(kernels.KernelArgumentError, match="w must be a contiguous CPU float32"):
        pack(torch.zeros(16, 64, dtype=torch.float64))
    with pytest.raises(kernels.KernelArgumentError, match=r"shape \(\?, \?\)"):
        pack(torch.zeros(16, 2, 32))
    with pytest.raises(kernels.KernelArgumentError, match="divisible by 32"):
        pack(torch.zeros(16, 48))
    dq = dequant._kernel("Q4_K")
    assert dq is not None
    with pytest.raises(kernels.KernelArgumentError, match="Q4_K blocks must be .* uint8"):
        dq(torch.zeros(144, dtype=torch.int8))
    with pytest.raises(kernels.KernelArgumentError, match="whole number of blocks"):
        dq(torch.zeros(145, dtype=torch.uint8))
    # A valid call still works after the refusals: one Q4_K block of zeros is 256 zeros.
    assert torch.equal(dq(torch.zeros(144, dtype=torch.uint8)), torch.zeros(256))


def test_no_compiler_falls_back_to_the_reference(monkeypatch) -> None:
    monkeypatch.setenv("CXX", "no-such-c++-compiler")
    monkeypatch.setattr(kernels, "_BUILT", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kernels.pack() is None
    if kernels.enabled():
        assert "no C++ compiler" in str(caught[0].message)
    monkeypatch.setattr(qlinear, "_Q8", [])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert qlinear.q8gemm() is None
    assert not kernels.fused_expected()  # int4 then packs for aten's kernel
    w = torch.randn(20, 64)
    got, want = qlinear.pack_q4(w), qlinear.pack_q4_reference(w)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    raw = np.zeros(144, dtype=np.uint8)
    assert torch.equal(dequant.dequantize(raw, "Q4_K"), torch.zeros(256))


def test_kernels_can_be_turned_off(monkeypatch) -> None:
    monkeypatch.setenv("VOICEPIPE_KERNELS", "0")
    monkeypatch.setattr(kernels, "_BUILT", {})
    assert kernels.pack() is None and kernels.q8gemm() is None
    assert not kernels.fused_expected()


_HOLD = """
import sys
from pathlib import Path
from voicepipe.nn import kernels
with kernels.file_lock(Path(sys.argv[1]), "a test") as held:
    print("held" if held else "not held", flush=True)
    sys.stdin.readline()  # hold it until the test says
"""


def test_the_build_lock_holds_across_processes(tmp_path) -> None:
    lock = tmp_path / "build" / "lock"
    env = os.environ | {"PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock)], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "held"
        # Held by the other process: not taken here. With no patience at all, the caller
        # is told so (the stale-lock rule: a build that hangs is built beside).
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with kernels.file_lock(lock, "kernels/x.cpp", stale_s=0.0) as held:
                assert not held
        assert "another process has held the build lock" in str(caught[0].message)
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
    with kernels.file_lock(lock, "kernels/x.cpp", stale_s=0.0) as held:
        assert held  # released when the holder let go


def test_a_killed_holder_leaves_no_stale_lock(tmp_path) -> None:
    lock = tmp_path / "lock"
    env = os.environ | {"PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock)], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    child.kill()  # a build killed half-way (Ctrl-C on a first start)
    child.wait(timeout=60)
    with kernels.file_lock(lock, "kernels/x.cpp", stale_s=0.0) as held:
        assert held


_BUILD = """
from voicepipe.nn import kernels
print("built" if kernels.pack() is not None else "not built", flush=True)
"""


@needs_kernels
def test_two_processes_asking_at_once_compile_once(tmp_path) -> None:
    """make's kernels job and a packing process both want kernels/pack on a fresh machine:
    one compiles, the other waits for it and loads the same library."""
    env = os.environ | {"PYTHONPATH": str(REPO), "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", "from voicepipe.nn import kernels; "
         "print(kernels.native_target('pack'))"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    so = Path(out.stdout.strip())
    assert so.is_relative_to(tmp_path) and not so.exists()
    # Hold the build's lock here until both processes wait on it, so they ask at once.
    with kernels.file_lock(so.parent / "lock", "the test") as held:
        assert held
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _BUILD],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )  # fmt: skip
            for _ in range(2)
        ]
        for p in procs:
            assert p.stderr is not None
            for line in p.stderr:  # EOF (the process ended without waiting) fails below
                if "waiting for another process's build of kernels/pack/pack.cpp" in line:
                    break
            else:
                pytest.fail("a process did not wait for the held build lock")
    outs = [p.communicate(timeout=300) for p in procs]
    assert [o.strip() for o, _ in outs] == ["built", "built"]
    logs = "".join(e for _, e in outs)
    assert logs.count("compiling kernels/pack/pack.cpp") == 1, logs
    assert logs.count("kernels/pack/pack.cpp compiled in") == 1, logs
    assert so.is_file()
