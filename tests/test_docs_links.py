"""Every document the code and docs cite is in the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITED = re.compile(r"(?<![\w/.])((?:docs|models|configs)/[\w./-]+\.(?:md|toml))")


def _tracked() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "*.toml", "*.js", "*.html"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [ROOT / p for p in out.split()]


def test_cited_documents_exist() -> None:
    missing = []
    for path in _tracked():
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in CITED.finditer(text):
            if "NAME" not in m.group(1) and not (ROOT / m.group(1)).exists():
                missing.append(f"{path.relative_to(ROOT)} cites {m.group(1)}")
    assert not missing, "\n".join(missing)


def test_design_is_cited_inside_the_repository() -> None:
    """docs/DESIGN.md, never a DESIGN.md that users do not have."""
    bare = re.compile(r"(?<![\w/])DESIGN\.md")
    offenders = []
    for path in _tracked():
        if path.parent == ROOT / "docs" or path == Path(__file__).resolve():
            continue  # docs/ cite their neighbours by bare name
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{path.relative_to(ROOT)}" for _ in bare.finditer(text)]
    assert not offenders, sorted(set(offenders))
