"""The on-disk cache of packed weights (voicepipe.nn.llm.packed) on the default model.

A load from the cache must give the very tensors packing gave (bit for bit)
and so the same logits; a damaged cache file is noticed, removed and rebuilt.
Each test packs SmolLM2-135M once or twice into a private $VOICEPIPE_HOME.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from voicepipe.nn.llm import llama, packed
from voicepipe.nn.llm.engine import gguf_path
from voicepipe.nn.llm.kv_cache import KVCache

PROMPT = [1, 504, 3458, 282, 4649, 314, 253, 1789, 30]


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    src = gguf_path("smollm2-135m")  # resolved in the shared model cache first
    monkeypatch.setenv("VOICEPIPE_HOME", str(tmp_path))
    monkeypatch.setenv("VOICEPIPE_PACKED_CACHE", "1")
    return src


def _logits(m: llama.Transformer) -> torch.Tensor:
    a = m.args
    cache = KVCache(a.n_layer, a.n_kv_head, 32, a.head_dim, m.dtype)
    return llama.forward(m, cache, torch.tensor(PROMPT), 0)


def _same_weights(a: llama.Transformer, b: llama.Transformer) -> None:
    sa, shapes_a = a.packed_state()
    sb, shapes_b = b.packed_state()
    assert shapes_a == shapes_b and sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k


def test_cached_load_is_bit_identical(home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    first, _ = llama.load(home, "int4", max_len=64)
    err = capfd.readouterr().err
    assert "packing" in err and "layer 30/30" in err  # the first load says what it does
    (path,) = packed.cache_dir().glob("*.pt")
    assert path == packed.cache_path(home, "int4", True)

    again, _ = llama.load(home, "int4", max_len=64)
    assert "packing" not in capfd.readouterr().err
    _same_weights(first, again)
    assert again.kernel == first.kernel and again.metadata == first.metadata
    assert again.args == first.args
    assert torch.equal(_logits(first), _logits(again))


def test_a_corrupt_cache_file_is_rebuilt(home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    ref, _ = llama.load(home, "int4", max_len=64)  # packed from the GGUF, writes the file
    path = packed.cache_path(home, "int4", True)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # e.g. a disk that filled up under another writer
    capfd.readouterr()

    m, _ = llama.load(home, "int4", max_len=64)
    err = capfd.readouterr().err
    assert "unusable" in err and "rebuilding" in err and "packing" in err
    _same_weights(ref, m)
    assert path.stat().st_size == len(data)  # rebuilt whole
    again, _ = llama.load(home, "int4", max_len=64)  # and read back
    assert "unusable" not in capfd.readouterr().err
    assert torch.equal(_logits(ref), _logits(again))


def test_models_pack_writes_the_file_serving_maps(
    home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`voicepipe models pack` (run by `models pull` during set-up) leaves the very file a
    later load maps; run again it does nothing, and says nothing with --quiet."""
    from voicepipe import cli

    path = packed.cache_path(home, "int4", True)
    assert not path.exists()
    assert cli.main(["models", "pack", str(home), "--weights", "int4"]) == 0
    assert path.is_file()
    assert "packed in" in capfd.readouterr().err
    mtime = path.stat().st_mtime_ns
    assert cli.main(["models", "pack", str(home), "--weights", "int4", "--quiet"]) == 0
    out = capfd.readouterr()
    assert out.out == "" and out.err == ""
    assert path.stat().st_mtime_ns == mtime
    assert cli.main(["models", "pack", "whisper-tiny.en"]) == 2
    assert "not an LLM" in capfd.readouterr().err


def test_models_pack_does_not_wait_for_the_fused_step(
    home: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Set-up packs while the fused step compiles: `models pack` never asks for the step,
    yet writes the file in the layout a load with the step built then maps."""
    from voicepipe import cli
    from voicepipe.nn import kernels

    def no(*_: object) -> None:
        pytest.fail("models pack asked for the fused step (it waits for its compile)")

    with monkeypatch.context() as m:
        m.setattr(kernels, "llama_step", no)
        assert cli.main(["models", "pack", str(home), "--weights", "int4"]) == 0
    (path,) = packed.cache_dir().glob("*.pt")
    capfd.readouterr()
    served, _ = llama.load(home, "int4", max_len=64)  # as serve loads it
    assert "packing" not in capfd.readouterr().err  # mapped, not packed again
    assert path == packed.cache_path(home, "int4", True)
    if kernels.llama_step() is not None:
        assert "-q4a8-" in path.name and served.fused is not None


# Runs a command, then prints the top-level entries of site-packages its modules came
# from (a vendored module counts as its vendor's: setuptools/_vendor/... is setuptools).
_IMPORTS = """
import sys
from voicepipe import cli
code = cli.main(sys.argv[1:])
files = [getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]
tops = {f.split("site-packages/")[1].split("/")[0].split(".")[0]
        for f in files if "site-packages/" in f}
print(" ".join(sorted(tops)))
sys.exit(code)
"""


def test_models_pack_needs_only_what_make_installs_first(home: Path) -> None:
    """make's pack job starts once torch and the few packages beside it (CORE) are in, while
    pip installs the rest: every third-party module `models pack` imports must come from
    those packages or what they depend on."""
    import importlib.metadata as md
    import os
    import re
    import subprocess
    import sys

    from packaging.requirements import Requirement

    repo = Path(__file__).resolve().parents[3]
    make = (repo / "Makefile").read_text()
    recipe = make[make.index("$(CORE): ") :].split("\n\n")[0]
    wanted = [w for line in re.findall(r"\$\(PIP\) (.+)", recipe) for w in line.split()]
    dists: set[str] = set()
    todo = [re.split(r"[=<>!~\[;]", w)[0] for w in wanted]
    while todo:  # the packages and their dependencies, as pip installs them
        name = todo.pop().lower().replace("_", "-")
        if name in dists:
            continue
        dists.add(name)
        for line in md.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    dists |= {"pip", "setuptools"}  # in every venv python -m venv makes
    allowed = {"_distutils_hack"}  # setuptools' own
    for top, owners in md.packages_distributions().items():
        if any(o.lower().replace("_", "-") in dists for o in owners):
            allowed.add(top)
    env = os.environ | {"PYTHONPATH": str(repo)}  # VOICEPIPE_HOME: the test's own (home)
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTS, "models", "pack", str(home), "--weights", "int4"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    used = {t for t in out.stdout.split() if not t.startswith("__editable__")}
    assert "gguf" in used and "torch" in used  # what packing is made of
    assert used <= allowed, f"not installed with torch by make: {sorted(used - allowed)}"
