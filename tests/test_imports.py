"""The import rules of docs/ARCHITECTURE.md, enforced: the sans-I/O cores stay pure.

``voicepipe/core/`` (protocol, session rules, endpointing, jitter buffer, text
front-end, …) and ``voicepipe/speculative/`` (speculative decoding) hold decisions,
not I/O: they import nothing from the model, stage, server or command layers,
no torch, and no asyncio or sockets. Checked on the source (ast), so a lazy
import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "voicepipe"
PURE = ("core", "speculative")
FORBIDDEN = (
    "voicepipe.nn",
    "voicepipe.stages",
    "voicepipe.server",
    "voicepipe.pipelines",
    "voicepipe.bench",
    "voicepipe.training",
    "voicepipe.commands",
    "voicepipe.client",
    "voicepipe.pipeline",
    "voicepipe.stage",
    "torch",
    "asyncio",
    "socket",
    "websockets",
)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def _bad(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


@pytest.mark.parametrize("package", PURE)
def test_pure_packages_import_no_io_and_no_models(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    bad = [
        f"{p.relative_to(ROOT.parent)}:{line} imports {name}"
        for p in files
        for line, name in _imports(p)
        if _bad(name)
    ]
    assert not bad, "\n".join(bad)


def test_the_rule_catches_what_it_forbids(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(
        "import numpy\ndef f():\n    from voicepipe.nn import llama\n"
        "from voicepipe.core import protocol\nimport asyncio.tasks\n"
    )
    names = [n for _, n in _imports(f) if _bad(n)]
    assert sorted(names) == ["asyncio.tasks", "voicepipe.nn", "voicepipe.nn.llama"]
