"""Packed weights cached on disk, so a model is dequantized and re-packed once, not per start.

Loading a GGUF model dequantizes every tensor to fp32 (the ``gguf`` package, in
numpy) and packs it into the kernels' format (``voicepipe.nn.llm.qlinear``): about a
minute for Qwen2.5-Coder-1.5B here. The packed tensors, the model's arguments
and its GGUF metadata (the tokenizer's) are saved once under
$VOICEPIPE_HOME/packed/ and later loads map that file (``torch.load(mmap=True)``):
no dequantization, no packing, not even the GGUF parse.

A file is keyed by the GGUF file's sha256, the weight format, the packing's
machine-dependent layout (activation dtype, which kernels pack the matrices,
torch version) and the packing code's version (a hash of the modules that
produce the tensors), so a new model file, another layout or changed packing
code gets a file of its own. A file that cannot be read back whole (truncated,
overwritten, another version's) is removed and rebuilt, with a message.
Files are written to a temporary name and renamed, so a killed run leaves none
half-written. VOICEPIPE_PACKED_CACHE=0 turns the cache off.

fp32 is not cached: it is the unpacked reference (tests), and its file would be
the size of the dequantized model.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from voicepipe.nn.llm.llama import Transformer

VERSION = 1  # of the file's layout (not of the packing: see code_version)
PACKED_FORMATS = ("bf16", "int8", "int4")
_SOURCES = "sources.json"  # sha256 of each GGUF file seen, by path, size and mtime


class PackedCacheError(RuntimeError):
    pass


def enabled() -> bool:
    return os.environ.get("VOICEPIPE_PACKED_CACHE", "1") != "0"


def cache_dir() -> Path:
    from voicepipe import registry

    return registry.home() / "packed"


@functools.cache
def code_version() -> str:
    """A hash of the code that turns GGUF tensors into packed ones (as this process runs it)."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256(str(VERSION).encode())
    for name in ("gguf.py", "qlinear.py", "llama.py", "packed.py"):
        h.update((here / name).read_bytes())
    return h.hexdigest()[:10]


def layout(weights: str, kernels: bool) -> str:
    """What the packed tensors depend on besides the model and the code: the activation
    dtype and matrix kernels this machine's set-up picks, and torch (aten's int4 packing)."""
    from voicepipe.nn.llm.qlinear import act_dtype, q4_kernel, q8gemm

    dt = str(act_dtype(weights, kernels)).removeprefix("torch.")
    k = ""
    if kernels and weights == "int8" and q8gemm() is not None:
        k = "-q8gemm"
    if kernels and weights == "int4" and q4_kernel():
        k = "-q4a8"
    return f"{weights}-{dt}{k}-torch{torch.__version__.split('+')[0]}"


def source_sha256(path: Path) -> str:
    """The GGUF file's sha256, hashed once per file version (by path, size and mtime)."""
    path = path.resolve()
    st = path.stat()
    memo_path = cache_dir() / _SOURCES
    try:
        memo = json.loads(memo_path.read_text())
    except (OSError, ValueError):
        memo = {}
    rec = memo.get(str(path))
    if rec and rec.get("size") == st.st_size and rec.get("mtime_ns") == st.st_mtime_ns:
        return str(rec["sha256"])
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            h.update(block)
    memo[str(path)] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": h.hexdigest()}
    _write_atomic(memo_path, lambda tmp: tmp.write_text(json.dumps(memo, indent=1)))
    return h.hexdigest()


def cache_path(source: Path, weights: str, kernels: bool) -> Path:
    sha = source_sha256(source)
    return cache_dir() / f"{sha[:16]}-{layout(weights, kernels)}-{code_version()}.pt"


def _write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _json_tensor(obj: object) -> torch.Tensor:
    # JSON in a byte tensor: torch's safe unpickler reads plain containers in Python,
    # too slowly for a tokenizer's 150k strings; json.loads is fast.
    return torch.frombuffer(bytearray(json.dumps(obj).encode()), dtype=torch.uint8)


def _from_json(t: torch.Tensor) -> object:
    return json.loads(bytes(t.numpy()).decode())


def save(path: Path, model: Transformer) -> None:
    state, shapes = model.packed_state()
    obj = {
        "version": torch.tensor(VERSION),
        "header": _json_tensor(
            {
                "args": dataclasses.asdict(model.args),
                "metadata": model.metadata,
                "shapes": shapes,
                "weights": model.weights,
            }
        ),
        "state": {k: v.contiguous() for k, v in state.items()},
    }
    _write_atomic(path, lambda tmp: torch.save(obj, tmp))
    _prune(path)


STALE_S = 3 * 86400.0  # a file of another code version unused this long is removed


def _prune(path: Path) -> None:
    """Remove the same model's files of other code versions that no load used for
    STALE_S (each load touches its file): every change to the packing code writes a
    new file, 2 GB for a 1.5B model. Recent ones stay: another checkout may use them."""
    stem = path.name.rsplit("-", 1)[0]  # everything but the code version
    now = time.time()
    for f in path.parent.glob(f"{stem}-*.pt"):
        try:
            if f != path and now - f.stat().st_mtime > STALE_S:
                f.unlink()
        except OSError:  # removed meanwhile by another process
            pass


def load(path: Path, weights: str, build: Callable[..., Transformer]) -> Transformer | None:
    """The model packed in ``path``, its tensors memory-mapped; None if there is no file.
    PackedCacheError if the file is there but unusable. ``build(args, metadata, state,
    shapes)`` makes the model of them (``Transformer.from_packed`` with the caller's
    settings: handed in, since llama.py imports this module)."""
    from voicepipe.nn.llm.gguf import ModelArgs

    if not path.is_file():
        return None
    try:
        obj = torch.load(path, mmap=True, weights_only=True, map_location="cpu")
        if int(obj["version"]) != VERSION:
            raise PackedCacheError(f"file version {int(obj['version'])}, not {VERSION}")
        head = _from_json(obj["header"])
        assert isinstance(head, dict)
        if head["weights"] != weights:
            raise PackedCacheError(f"holds {head['weights']} weights, not {weights}")
        args = ModelArgs(**head["args"])
        os.utime(path)  # in use: _prune keeps it
        return build(args, head["metadata"], obj["state"], head["shapes"])
    except Exception as e:  # truncated / overwritten zip, missing tensor, wrong shapes
        raise PackedCacheError(str(e) or type(e).__name__) from e


class Progress:
    """One stderr line while a model is packed: rewritten in place on a terminal, else
    printed at every quarter (a log file gets five lines, not one per layer)."""

    def __init__(self, what: str, stream=None) -> None:
        self.what = what
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self.shown = -1

    def __call__(self, i: int, n: int) -> None:
        quarter = 4 * i // n
        if not self.tty and quarter == self.shown:
            return
        self.shown = quarter
        s = time.perf_counter() - self.t0
        end = "\r" if self.tty and i < n else "\n"
        print(f"voicepipe: packing {self.what}: layer {i}/{n} ({s:.0f} s)", end=end,
              file=self.stream, flush=True)  # fmt: skip

    def note(self, text: str) -> None:
        print(f"voicepipe: {text}", file=self.stream, flush=True)
