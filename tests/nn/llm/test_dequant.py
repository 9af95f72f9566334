"""The torch block dequantizer gives gguf's numbers bit for bit (random blocks, real tensors)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize

from voicepipe.nn.llm.dequant import BLOCKS, dequantize, reference

# Where each format keeps its fp16 scales (byte offsets): random bytes there could be
# inf/NaN, which both sides would carry but torch.equal would not call equal.
_SCALES = {"Q4_1": (0, 2), "Q8_0": (0,), "Q4_K": (0, 2), "Q6_K": (208,)}


def _random_blocks(name: str, n: int, seed: int) -> np.ndarray:
    size, _ = BLOCKS[name]
    rng = np.random.default_rng(seed)
    b = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for off in _SCALES[name]:
        h = rng.uniform(-2.0, 2.0, size=n).astype(np.float16)
        b[:, off : off + 2] = h.view(np.uint8).reshape(n, 2)
    return b


@pytest.mark.parametrize("fn", [dequantize, reference], ids=["served", "torch"])
@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_random_blocks_match_gguf(name: str, fn) -> None:
    """What loads use (the C++ kernel for the K-quants where it builds) and the torch path."""
    blocks = _random_blocks(name, 257, seed=len(name))
    want = np.asarray(gguf_dequantize(blocks, GGMLQuantizationType[name]), dtype=np.float32)
    got = fn(blocks, name)
    assert got is not None
    assert got.shape == (want.size,)
    assert torch.equal(got, torch.from_numpy(want.reshape(-1)))


def test_unknown_formats_are_left_to_gguf() -> None:
    assert dequantize(np.zeros(4, dtype=np.float32), "F32") is None
    assert dequantize(np.zeros(22, dtype=np.uint8), "Q5_0") is None


def test_a_partial_block_is_refused() -> None:
    with pytest.raises(ValueError, match="whole number of blocks"):
        dequantize(np.zeros(145, dtype=np.uint8), "Q4_K")


def test_real_tensors_match_gguf() -> None:
    """Every quantized tensor type of the 135M's GGUF (Q4_1, Q8_0), through the loader."""
    from gguf import GGUFReader

    from voicepipe import registry
    from voicepipe.nn.llm.engine import gguf_path

    if registry.verify("smollm2-135m", deep=False):
        pytest.skip("smollm2-135m not pulled (voicepipe models pull)")
    reader = GGUFReader(str(gguf_path("smollm2-135m")))
    seen = set()
    for t in reader.tensors:
        kind = t.tensor_type.name
        if kind not in BLOCKS or kind in seen:
            continue
        seen.add(kind)
        want = np.asarray(gguf_dequantize(t.data, t.tensor_type), dtype=np.float32)
        got = dequantize(t.data, kind)
        assert got is not None and torch.equal(got, torch.from_numpy(want.reshape(-1))), t.name
    assert seen == {"Q4_1", "Q8_0"}
