"""Read GGUF files (llama / qwen2 architectures) into plain fp32 torch tensors.

``gguf_header`` parses the file's header (the ``gguf`` package's reader gives the
same, far slower); voicepipe.nn.llm.dequant and the ``gguf`` package dequantize every
block format (Q4_0/Q4_1/Q4_K/Q6_K/Q8_0/…) to fp32; re-quantization for the CPU kernels
happens later in ``voicepipe.nn.llm.llama``.

Two layout facts matter:
- llama.cpp's converter permutes the Q and K projections of *llama* models so
  that rotary pairs are adjacent (interleaved, "GPT-J" RoPE). qwen2 GGUFs keep
  the Hugging Face layout (halves rotated, "NeoX" RoPE). The engine uses the
  interleaved form for both, so qwen2's Q/K rows (and biases) are permuted here
  the way the converter does it for llama. Attention scores are unchanged:
  q and k get the same permutation of each head's dimensions.
- SmolLM2 ties the output head to the token embedding (no ``output.weight``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from voicepipe.nn.llm import gguf_header
from voicepipe.nn.llm.gguf_header import TensorInfo

ARCHITECTURES = ("llama", "qwen2")


class GGUFError(RuntimeError):
    pass


@dataclass(frozen=True)
class ModelArgs:
    arch: str
    n_layer: int
    dim: int
    ffn_dim: int
    n_head: int
    n_kv_head: int
    head_dim: int
    vocab_size: int
    rope_base: float
    norm_eps: float
    context_length: int
    attn_bias: bool
    tied_embeddings: bool
    name: str = ""


@dataclass
class GGUFModel:
    args: ModelArgs
    metadata: dict[str, Any]
    tensors: Mapping[str, torch.Tensor]  # GGUF names → fp32 (out, in), dequantized on access
    path: Path = field(default_factory=Path)


def read_metadata(reader: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, f in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        try:
            out[key] = f.contents()
        except Exception:  # exotic field types we never use
            continue
    return out


def _args(meta: dict[str, Any], tensor_names: set[str]) -> ModelArgs:
    arch = meta.get("general.architecture", "")
    if arch not in ARCHITECTURES:
        raise GGUFError(f"unsupported GGUF architecture {arch!r} (supported: {ARCHITECTURES})")

    def get(key: str, default: Any = None) -> Any:
        full = f"{arch}.{key}"
        if full not in meta and default is None:
            raise GGUFError(f"GGUF metadata lacks {full}")
        return meta.get(full, default)

    dim = int(get("embedding_length"))
    n_head = int(get("attention.head_count"))
    vocab = meta.get(f"{arch}.vocab_size") or len(meta["tokenizer.ggml.tokens"])
    return ModelArgs(
        arch=arch,
        n_layer=int(get("block_count")),
        dim=dim,
        ffn_dim=int(get("feed_forward_length")),
        n_head=n_head,
        n_kv_head=int(get("attention.head_count_kv", n_head)),
        head_dim=int(get("rope.dimension_count", dim // n_head)),
        vocab_size=int(vocab),
        rope_base=float(get("rope.freq_base", 10000.0)),
        norm_eps=float(get("attention.layer_norm_rms_epsilon")),
        context_length=int(get("context_length")),
        attn_bias="blk.0.attn_q.bias" in tensor_names,
        tied_embeddings="output.weight" not in tensor_names,
        name=str(meta.get("general.name", "")),
    )


def neox_to_interleaved(w: torch.Tensor, n_head: int) -> torch.Tensor:
    """Permute Q/K rows from half-rotated (HF/NeoX) to pair-interleaved RoPE order.

    w: (n_head * head_dim, …) or a bias (n_head * head_dim,).
    """
    rest = w.shape[1:]
    hd = w.shape[0] // n_head
    # (H, 2, hd/2, …) → (H, hd/2, 2, …): the i-th of each half become a pair.
    return w.reshape(n_head, 2, hd // 2, *rest).transpose(1, 2).reshape(w.shape)


class LazyTensors(Mapping[str, torch.Tensor]):
    """Dequantizes a tensor when it is read, so a 1.5B model never sits in RAM as fp32."""

    def __init__(self, tensors: list[TensorInfo], args: ModelArgs) -> None:
        self._t = {t.name: t for t in tensors}
        self.args = args

    def __getitem__(self, name: str) -> torch.Tensor:
        from gguf.quants import dequantize

        from voicepipe.nn.llm.dequant import dequantize as fast_dequantize

        t = self._t[name]
        shape = tuple(int(s) for s in reversed(t.shape))
        w = fast_dequantize(t.data, t.tensor_type.name)
        if w is None:  # F32 tensors and formats the fast path does not know
            arr = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)  # writable copy
            w = torch.from_numpy(arr)
        w = w.reshape(shape)
        a = self.args
        if a.arch == "qwen2" and name.split(".")[-2] in ("attn_q", "attn_k"):
            w = neox_to_interleaved(w, a.n_head if ".attn_q." in name else a.n_kv_head)
        return w

    def __iter__(self) -> Iterator[str]:
        return iter(self._t)

    def __len__(self) -> int:
        return len(self._t)


def load(path: str | Path) -> GGUFModel:
    """Parse metadata and tensor index (tensors dequantize lazily). GGUFError names the file."""
    path = Path(path)
    if not path.is_file():
        raise GGUFError(f"GGUF file not found: {path}")
    try:
        meta, infos = gguf_header.read(path)  # GGUFReader's results, ~30x faster
    except Exception as e:
        raise GGUFError(f"{path}: not a readable GGUF file ({e})") from e
    meta = {k: v for k, v in meta.items() if not k.startswith("GGUF.")}
    args = _args(meta, {t.name for t in infos})
    tensors = LazyTensors(infos, args)
    return GGUFModel(args=args, metadata=meta, tensors=tensors, path=path)
