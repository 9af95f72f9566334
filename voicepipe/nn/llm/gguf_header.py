"""A GGUF file's metadata and tensor index, read in one pass over its header.

The ``gguf`` package's ``GGUFReader`` builds a numpy view per array element: a
Qwen2.5 GGUF's 151,936 tokens and 151,387 merges make ~455k of them, 15-50 s on
this CPU before a first load can start packing. The format is small (GGUF v2/v3:
header, key/value pairs, tensor infos, aligned data), so the header is parsed here
with ``struct`` over a memory map and the tensors are numpy views into it, as
``GGUFReader`` gives them; ``gguf`` still supplies the type tables and the
dequantizers of the formats voicepipe.nn.llm.dequant does not handle.
tests/nn/llm/test_gguf_header.py checks both readers agree on real files.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# GGUF value types: struct format of the scalars; 8 = string, 9 = array.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?",
          10: "<u8", 11: "<i8", 12: "<f8"}  # fmt: skip
_STRING, _ARRAY = 8, 9


class HeaderError(ValueError):
    pass


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # GGUF order: the fastest-varying dimension first
    tensor_type: GGMLQuantizationType
    data: np.ndarray  # a view into the file: uint8 blocks, or F32/F16 values


class _Cursor:
    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, fmt: str) -> Any:
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self) -> str:
        n = self.take("<Q")
        s = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return s

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype != _ARRAY:
            raise HeaderError(f"unknown GGUF value type {vtype} at byte {self.pos}")
        etype, n = self.take("<I"), self.take("<Q")
        if etype in _NUMPY:  # numbers: one bulk read
            dt = np.dtype(_NUMPY[etype])
            arr = np.frombuffer(self.buf, dtype=dt, count=n, offset=self.pos)
            self.pos += n * dt.itemsize
            return arr.tolist()
        return [self.value(etype) for _ in range(n)]


def read(path: str | Path) -> tuple[dict[str, Any], list[TensorInfo]]:
    """(metadata, tensors) of a GGUF file; HeaderError says what is wrong with it."""
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    buf = memoryview(mm)
    if bytes(buf[:4]) != MAGIC:
        raise HeaderError("no GGUF magic")
    c = _Cursor(buf)
    c.pos = 4
    version = c.take("<I")
    if version not in (2, 3):
        raise HeaderError(f"GGUF version {version} (read: 2 and 3)")
    n_tensors, n_kv = c.take("<Q"), c.take("<Q")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = c.string()
        meta[key] = c.value(c.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = c.string()
        dims = tuple(c.take("<Q") for _ in range(c.take("<I")))
        infos.append((name, dims, c.take("<I"), c.take("<Q")))
    align = int(meta.get("general.alignment", DEFAULT_ALIGNMENT))
    start = -(-c.pos // align) * align
    whole = np.frombuffer(mm, dtype=np.uint8)
    tensors = []
    for name, dims, type_id, offset in infos:
        qtype = GGMLQuantizationType(type_id)
        block, size = GGML_QUANT_SIZES[qtype]
        n = int(np.prod(dims, dtype=np.int64))
        nbytes = n // block * size
        raw = whole[start + offset : start + offset + nbytes]
        if raw.size != nbytes:
            raise HeaderError(f"tensor {name} runs past the end of the file")
        data: np.ndarray
        if qtype == GGMLQuantizationType.F32:
            data = raw.view(np.float32)
        elif qtype == GGMLQuantizationType.F16:
            data = raw.view(np.float16)
        else:
            data = raw
        tensors.append(TensorInfo(name, dims, qtype, data))
    return meta, tensors
