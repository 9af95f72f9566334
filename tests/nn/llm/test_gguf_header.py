"""Our GGUF header reader gives what the gguf package's GGUFReader gives, and refuses junk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader

from voicepipe import registry
from voicepipe.nn.llm import gguf_header
from voicepipe.nn.llm.gguf import GGUFError, read_metadata
from voicepipe.nn.llm.gguf import load as load_gguf


@pytest.fixture(scope="module")
def path() -> Path:
    from voicepipe.nn.llm.engine import gguf_path

    if registry.verify("smollm2-135m", deep=False):
        pytest.skip("smollm2-135m not pulled (voicepipe models pull)")
    return Path(gguf_path("smollm2-135m"))


def test_same_metadata_and_tensors_as_gguf(path: Path) -> None:
    meta, tensors = gguf_header.read(path)
    reader = GGUFReader(str(path))
    assert meta == read_metadata(reader)
    assert len(meta["tokenizer.ggml.tokens"]) == 49152  # an array of strings, whole
    assert [t.name for t in tensors] == [t.name for t in reader.tensors]
    for ours, theirs in zip(tensors, reader.tensors, strict=True):
        assert ours.tensor_type == theirs.tensor_type, ours.name
        assert ours.shape == tuple(int(d) for d in theirs.shape), ours.name
        a = ours.data.reshape(-1).view(np.uint8)
        b = np.asarray(theirs.data).reshape(-1).view(np.uint8)
        assert np.array_equal(a, b), ours.name


def test_not_a_gguf_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"PK\x03\x04" + bytes(60))
    with pytest.raises(GGUFError, match="model.gguf: not a readable GGUF file"):
        load_gguf(bad)


def test_a_truncated_file_is_refused(path: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[: 4 << 20])  # the header, then a fraction of the data
    with pytest.raises(GGUFError, match="past the end of the file"):
        load_gguf(cut)
