"""Build the project's C++ kernels (``kernels/``) on first use, once per machine.

Each kernel sits beside a pure-PyTorch reference it is tested against, and
every caller falls back to that reference when the build is impossible: no
compiler, a CPU with neither AVX-512 nor AVX2, or ``VOICEPIPE_KERNELS=0``.
The kernels are compiled with ``-march=native`` for AVX-512 VNNI or AVX2 + FMA +
F16C (kernels/llama_step/simd.h picks). A build's name carries a hash of its
sources (headers included) and flags, so editing a kernel rebuilds it instead of
loading a stale cached build.

Two kinds of build:

- **native** (kernels/pack, kernels/q8gemm): plain ``extern "C"`` functions over raw
  pointers, compiled by the system C++ compiler alone and loaded with ctypes. They
  parse no torch header, so they compile in seconds (through torch's extension
  machinery each took ~40 s of a fresh machine's start-up). The callers check dtypes,
  shapes and contiguity (``check``), allocate the outputs with torch and pass
  ``data_ptr()``. A lock file (fcntl) serializes a build across processes: ``make``'s
  kernels job and a packing or serving process may ask for the same kernel at once.
- **torch extension** (kernels/llama_step): it holds tensors and a pybind class, so it
  goes through ``torch.utils.cpp_extension.load`` (torch's own lock file).
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

KERNELS_DIR = Path(__file__).resolve().parent.parent.parent / "kernels"
_BUILT: dict[str, ModuleType | ctypes.CDLL | None] = {}
# One lock per kernel: two kernels build side by side (a core each), while two
# callers of the same kernel wait for the one build.
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()

STALE_LOCK_S = 600.0  # the longest build (llama_step) takes 1-2 minutes here

_P, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int


@dataclass(frozen=True)
class Native:
    """A native kernel: its source, the headers it includes (they are hashed too), its own
    compiler flags, and what it exports: function → ctypes argument types (each returns
    void; pointers as c_void_p, a tensor's data_ptr(), sizes as int64, threads as int)."""

    main: str
    headers: tuple[str, ...]
    cflags: tuple[str, ...]
    functions: dict[str, list[type]]


NATIVE = {
    # Weight preparation at load: GGUF dequantization and int4 packing, bit-identical to
    # their torch references. -ffp-contract=off: the references round after every
    # multiply, so no multiply-add may be fused.
    "pack": Native(
        "pack/pack.cpp",
        (),
        ("-ffp-contract=off",),
        {
            "vp_pack_q4": [_P, _I64, _I64, _P, _P, _P, _INT],
            "vp_dequant_q4_k": [_P, _I64, _P, _INT],
            "vp_dequant_q6_k": [_P, _I64, _P, _INT],
        },
    ),
    # The weight-only int8 GEMM for a few rows (the drafter's linears).
    "q8gemm": Native(
        "q8gemm/q8gemm.cpp",
        ("q8gemm/q8gemm.h", "llama_step/simd.h"),
        (),
        {"vp_q8_gemm": [_P, _P, _P, _P, _I64, _I64, _I64, _INT]},
    ),
}


class KernelArgumentError(ValueError):
    """A tensor a native kernel cannot take (dtype, shape, layout, device): said before
    the call, since the C side trusts the pointers it is given."""


def enabled() -> bool:
    """Kernels may be used here: not disabled, and the CPU has AVX-512 or AVX2 (torch's
    own dispatch level: "AVX512" or "AVX2"; "DEFAULT" and non-x86 levels have no kernel)."""
    if os.environ.get("VOICEPIPE_KERNELS", "1") == "0":
        return False
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def compiler() -> list[str] | None:
    """The C++ compiler command: $CXX (it may carry a wrapper, e.g. "ccache g++"), else
    c++, as torch's cpp_extension picks it; None when it is not installed."""
    cmd = shlex.split(os.environ.get("CXX", "c++"))
    if not cmd or shutil.which(cmd[0]) is None:
        return None
    return cmd


def check(t: torch.Tensor, what: str, dtype: torch.dtype, shape: tuple[int | None, ...]) -> None:
    """KernelArgumentError unless t is a contiguous CPU tensor of ``dtype`` and ``shape``
    (None: any size on that axis)."""
    if (
        t.dtype != dtype
        or t.dim() != len(shape)
        or any(s is not None and s != n for s, n in zip(shape, t.shape, strict=True))
        or not t.is_contiguous()
        or t.device.type != "cpu"
    ):
        want = ", ".join("?" if s is None else str(s) for s in shape)
        raise KernelArgumentError(
            f"{what} must be a contiguous CPU {str(dtype).removeprefix('torch.')} tensor of "
            f"shape ({want}); got {str(t.dtype).removeprefix('torch.')} {tuple(t.shape)}"
            f"{'' if t.is_contiguous() else ', not contiguous'} on {t.device}"
        )


def _once(
    name: str, make: Callable[[], ModuleType | ctypes.CDLL | None]
) -> ModuleType | ctypes.CDLL | None:
    with _LOCKS_LOCK:
        lock = _LOCKS.setdefault(name, threading.Lock())
    with lock:
        if name not in _BUILT:
            _BUILT[name] = make()
        return _BUILT[name]


def _ext_name(name: str, main: str, headers: tuple[str, ...], flags: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for rel in (main, *headers):
        digest.update((KERNELS_DIR / rel).read_bytes())
    digest.update(" ".join(flags).encode())
    return f"voicepipe_{name}_{digest.hexdigest()[:10]}"


def _say(text: str) -> None:
    # One write per line: print() writes the text and the newline apart, and two kernels
    # building side by side (two threads) then ran their lines together.
    sys.stderr.write(f"voicepipe: {text}\n")
    sys.stderr.flush()


def _compiling(main: str, how_long: str) -> None:
    # A first build is silent otherwise: say what is happening, as the weight packing does.
    cpu = torch.backends.cpu.get_cpu_capability()
    _say(f"compiling kernels/{main} for this CPU ({cpu}), once per machine: {how_long}")


# ----------------------------------------------------------------- native (ctypes) builds


def native(name: str) -> ctypes.CDLL | None:
    """The loaded library of NATIVE[name] (its functions typed), or None if it cannot be
    built here."""
    lib = _once(name, lambda: _build_native(name))
    assert lib is None or isinstance(lib, ctypes.CDLL)
    return lib


def _build_native(name: str) -> ctypes.CDLL | None:
    k = NATIVE[name]
    if not enabled() or not (KERNELS_DIR / k.main).is_file():
        return None
    cxx = compiler()
    if cxx is None:
        warnings.warn(f"kernels/{k.main} not built (no C++ compiler: $CXX or c++); "
                      "using the PyTorch reference", stacklevel=4)  # fmt: skip
        return None
    so = native_target(name, cxx)
    try:
        if not so.is_file():
            with file_lock(so.parent / "lock", f"kernels/{k.main}"):
                if not so.is_file():  # else another process built it while we waited
                    src = _staged(so.stem, k.main, k.headers)
                    _compile([*cxx, *_native_flags(k.cflags)], src, so, k.main)
        lib = ctypes.CDLL(str(so))
        for fn, argtypes in k.functions.items():
            f = getattr(lib, fn)
            f.argtypes, f.restype = argtypes, None
        return lib
    except (OSError, AttributeError, subprocess.CalledProcessError) as e:
        warnings.warn(f"kernels/{k.main} not built ({e}); using the PyTorch reference",
                      stacklevel=4)  # fmt: skip
        return None


def _native_flags(cflags: tuple[str, ...]) -> tuple[str, ...]:
    return ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17", *cflags)


def native_target(name: str, cxx: list[str] | None = None) -> Path:
    """Where NATIVE[name]'s library is (or will be) built: a folder and file named after
    the hash of its sources, the compiler and the flags; its build lock is ``lock`` there."""
    k = NATIVE[name]
    cmd = (*(cxx or compiler() or []), *_native_flags(k.cflags))
    ext = _ext_name(name, k.main, k.headers, cmd)
    return build_root() / ext / f"{ext}.so"


def _compile(cmd: list[str], src: Path, so: Path, main: str) -> None:
    _compiling(main, "a few seconds")
    t0 = time.perf_counter()
    tmp = so.with_name(f".{so.name}.{os.getpid()}.tmp")  # renamed whole: never half a library
    try:
        r = subprocess.run([*cmd, str(src), "-o", str(tmp)], capture_output=True, text=True)
        if r.returncode:
            tail = " ".join(r.stderr.strip().splitlines()[-3:])
            raise subprocess.CalledProcessError(r.returncode, f"{cmd[0]} {src.name}: {tail}")
        os.replace(tmp, so)
    finally:
        tmp.unlink(missing_ok=True)
    _say(f"kernels/{main} compiled in {time.perf_counter() - t0:.1f} s")


@contextmanager
def file_lock(path: Path, what: str, stale_s: float | None = None) -> Iterator[bool]:
    """Hold ``path``'s exclusive lock (fcntl) across processes; yields whether it is held.

    The kernel drops a dead holder's lock, so a killed build leaves no stale lock; one
    held past ``stale_s`` (default STALE_LOCK_S: a build that hangs) is given up on with a
    warning and the caller builds beside it (the result is renamed into place whole, so
    two builds cannot corrupt each other)."""
    limit = STALE_LOCK_S if stale_s is None else stale_s
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        t0 = time.monotonic()
        told = False
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                waited = time.monotonic() - t0
                if waited > limit:
                    warnings.warn(f"{what}: another process has held the build lock {path} for "
                                  f"{waited:.0f} s; building beside it", stacklevel=3)  # fmt: skip
                    held = False
                    break
                if not told:
                    _say(f"waiting for another process's build of {what}")
                    told = True
                time.sleep(0.05)
        try:
            yield held
        finally:
            if held:
                fcntl.flock(f, fcntl.LOCK_UN)


def pack() -> ctypes.CDLL | None:
    """Weight preparation at load (kernels/pack), or None."""
    return native("pack")


def q8gemm() -> ctypes.CDLL | None:
    """The weight-only int8 GEMM for a few rows (kernels/q8gemm), or None."""
    return native("q8gemm")


# ----------------------------------------------------------------- torch extension builds

_LLAMA_STEP_HEADERS = (
    "q8gemm/q8gemm.h",
    "llama_step/q8a8.h",
    "llama_step/q4a8.h",
    "llama_step/simd.h",
    "llama_step/matrix.h",
    "llama_step/ops.h",
    "llama_step/team.h",
    "llama_step/profile.h",
    "torch_binding.h",
)


def llama_step() -> ModuleType | None:
    """The fused llama forward (kernels/llama_step), or None."""
    return build("llama_step", "llama_step/llama_step.cpp", _LLAMA_STEP_HEADERS)


def build(
    name: str, main: str, headers: tuple[str, ...] = (), cflags: tuple[str, ...] = ()
) -> ModuleType | None:
    """The compiled torch extension of kernels/<main> (relative paths), or None if it
    cannot be built. ``cflags``: the kernel's own compiler flags, after the common ones."""
    mod = _once(name, lambda: _build(name, main, headers, cflags))
    assert mod is None or isinstance(mod, ModuleType)
    return mod


def _build(
    name: str, main: str, headers: tuple[str, ...], cflags: tuple[str, ...]
) -> ModuleType | None:
    if not enabled() or not (KERNELS_DIR / main).is_file():
        return None
    ext = _ext_name(name, main, headers, cflags)
    try:
        from torch.utils.cpp_extension import load

        _clear_stale_lock(build_dir(ext) / "lock")
        fresh = not (build_dir(ext) / f"{ext}.so").is_file()
        t0 = time.perf_counter()
        if fresh:
            _compiling(main, "about a minute")
        mod = load(
            name=ext,
            sources=[str(_staged(ext, main, headers))],
            extra_cflags=["-O3", "-march=native", "-fopenmp", *cflags],
            extra_ldflags=["-fopenmp"],
            verbose=False,
        )
        if fresh:
            _say(f"kernels/{main} compiled in {time.perf_counter() - t0:.1f} s")
        return mod
    except Exception as e:  # no compiler / headers: the reference path still works
        warnings.warn(f"kernels/{main} not built ({e}); using the PyTorch reference", stacklevel=4)
        return None


def fused_expected() -> bool:
    """The fused step (kernels/llama_step) is built here, or will be: kernels enabled, a
    compiler and ninja present, no failed build in this process. Asked by what decides
    the packed weights' layout, so packing need not wait for the step's minute of compiling
    (set-up packs while it compiles); whatever runs the model still waits for the build."""
    if "llama_step" in _BUILT:
        return _BUILT["llama_step"] is not None
    return enabled() and compiler() is not None and _ninja()


def _ninja() -> bool:
    from torch.utils.cpp_extension import is_ninja_available

    return bool(is_ninja_available())


def build_root() -> Path:
    """Where the native kernels build and every kernel's sources are staged:
    $TORCH_EXTENSIONS_DIR (torch builds its extensions there too: a fresh-clone run or a
    test with its own folder shares nothing with the user's), else torch's per-user cache
    folder."""
    from torch.utils import cpp_extension

    return Path(os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root())


def _staged(ext: str, main: str, headers: tuple[str, ...]) -> Path:
    """kernels/<main> copied (with its headers, same relative layout) to a folder named
    after the build, i.e. after the sources' hash: the build then names the same
    source path whichever checkout asks for it. torch rebuilds an extension whose
    recorded build command changed, and a source path from another checkout of the same
    sources changes it: two checkouts would rebuild it in turn (a minute per start).
    (A native build compiles the copy too: a source edited mid-build cannot end up
    under the old hash.)"""
    root = build_root() / "voicepipe-src" / ext
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


def _clear_stale_lock(lock: Path) -> None:
    """Remove a torch build lock left by a build that was killed (e.g. Ctrl-C on first use).

    torch waits for the lock file to go away, so a stale one would hang every later
    start; one older than any real build is removed.
    """
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return
    if age > STALE_LOCK_S:
        warnings.warn(f"removing a stale kernel build lock ({age:.0f} s old): {lock}", stacklevel=4)
        lock.unlink(missing_ok=True)
