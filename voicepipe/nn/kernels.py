"""Build the project's C++ kernels (``kernels/``) on first use, once per machine.

Each kernel sits beside a pure-PyTorch reference it is tested against, and
every caller falls back to that reference when the build is impossible: no
compiler, a CPU with neither AVX-512 nor AVX2, or ``VOICEPIPE_KERNELS=0``.
The kernels are compiled with ``-march=native`` for AVX-512 VNNI or AVX2 + FMA +
F16C (kernels/llama_step/simd.h picks). The extension's name carries
a hash of its sources (headers included), so editing a kernel rebuilds it
instead of loading a stale cached build.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
import warnings
from pathlib import Path
from types import ModuleType

import torch

KERNELS_DIR = Path(__file__).resolve().parent.parent.parent / "kernels"
_BUILT: dict[str, ModuleType | None] = {}
# One lock per kernel: two kernels build side by side (a core each), while two
# callers of the same kernel wait for the one build.
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def enabled() -> bool:
    """Kernels may be used here: not disabled, and the CPU has AVX-512 or AVX2 (torch's
    own dispatch level: "AVX512" or "AVX2"; "DEFAULT" and non-x86 levels have no kernel)."""
    if os.environ.get("VOICEPIPE_KERNELS", "1") == "0":
        return False
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def build(
    name: str, main: str, headers: tuple[str, ...] = (), cflags: tuple[str, ...] = ()
) -> ModuleType | None:
    """The compiled module of kernels/<main> (relative paths), or None if it cannot be built.
    ``cflags``: the kernel's own compiler flags, after the common ones."""
    with _LOCKS_LOCK:
        lock = _LOCKS.setdefault(name, threading.Lock())
    with lock:
        if name not in _BUILT:
            _BUILT[name] = _build(name, main, headers, cflags)
        return _BUILT[name]


def _build(
    name: str, main: str, headers: tuple[str, ...], cflags: tuple[str, ...]
) -> ModuleType | None:
    src = KERNELS_DIR / main
    if not enabled() or not src.is_file():
        return None
    digest = hashlib.sha256()
    for rel in (main, *headers):
        digest.update((KERNELS_DIR / rel).read_bytes())
    digest.update(" ".join(cflags).encode())
    ext = f"voicepipe_{name}_{digest.hexdigest()[:10]}"
    try:
        from torch.utils.cpp_extension import load

        _clear_stale_lock(build_dir(ext) / "lock")
        # A first build is silent for a minute or more (torch's headers dominate):
        # say what is happening, as the weight packing does.
        fresh = not (build_dir(ext) / f"{ext}.so").is_file()
        t0 = time.perf_counter()
        if fresh:
            print(
                f"voicepipe: compiling kernels/{main} for this CPU "
                f"({torch.backends.cpu.get_cpu_capability()}), once per machine: about a minute",
                file=sys.stderr,
                flush=True,
            )
        mod = load(
            name=ext,
            sources=[str(_staged(ext, main, headers))],
            extra_cflags=["-O3", "-march=native", "-fopenmp", *cflags],
            extra_ldflags=["-fopenmp"],
            verbose=False,
        )
        if fresh:
            print(
                f"voicepipe: kernels/{main} compiled in {time.perf_counter() - t0:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        return mod
    except Exception as e:  # no compiler / headers: the reference path still works
        warnings.warn(f"kernels/{main} not built ({e}); using the PyTorch reference", stacklevel=3)
        return None


def _staged(ext: str, main: str, headers: tuple[str, ...]) -> Path:
    """kernels/<main> copied (with its headers, same relative layout) to a folder named
    after the extension, i.e. after the sources' hash: the build then names the same
    source path whichever checkout asks for it. torch rebuilds an extension whose
    recorded build command changed, and a source path from another checkout of the same
    sources changes it: two checkouts would rebuild it in turn (a minute per start)."""
    from torch.utils import cpp_extension

    root = Path(cpp_extension.get_default_build_root()) / "voicepipe-src" / ext
    for rel in (main, *headers):
        dst = root / rel
        if not dst.is_file():  # same name, same content: written once, atomically
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
            tmp.write_bytes((KERNELS_DIR / rel).read_bytes())
            os.replace(tmp, dst)
    return root / main


def build_dir(ext: str) -> Path:
    """Where torch builds (and locks) extension ``ext``: $TORCH_EXTENSIONS_DIR, else
    its cache root's per-Python, per-accelerator folder."""
    from torch.utils import cpp_extension

    private = getattr(cpp_extension, "_get_build_directory", None)  # torch's own rule
    if private is not None:
        return Path(private(ext, verbose=False))
    return Path(cpp_extension.get_default_build_root()) / ext  # its documented root


STALE_LOCK_S = 600.0  # a build takes 1-2 minutes here


def _clear_stale_lock(lock: Path) -> None:
    """Remove a build lock left by a build that was killed (e.g. Ctrl-C on first use).

    torch waits for the lock to go away, so a stale one would hang every later
    start; one older than any real build is removed.
    """
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return
    if age > STALE_LOCK_S:
        warnings.warn(f"removing a stale kernel build lock ({age:.0f} s old): {lock}", stacklevel=4)
        lock.unlink(missing_ok=True)


def pack() -> ModuleType | None:
    """Weight preparation at load (kernels/pack): GGUF dequantization and int4 packing,
    bit-identical to their torch references. -ffp-contract=off: the references round
    after every multiply, so no multiply-add may be fused."""
    return build("pack", "pack/pack.cpp", ("torch_binding.h",), ("-ffp-contract=off",))


def llama_step() -> ModuleType | None:
    """The fused llama forward (kernels/llama_step), or None."""
    return build(
        "llama_step",
        "llama_step/llama_step.cpp",
        (
            "q8gemm/q8gemm.h",
            "llama_step/q8a8.h",
            "llama_step/q4a8.h",
            "llama_step/simd.h",
            "llama_step/matrix.h",
            "llama_step/ops.h",
            "llama_step/team.h",
            "llama_step/profile.h",
            "torch_binding.h",
        ),
    )
