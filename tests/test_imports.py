"""The import rules of docs/ARCHITECTURE.md, enforced on the source (ast), so a lazy
import inside a function counts too; only imports under ``if TYPE_CHECKING:`` are
left out (they never run).

- The table: each part of ``voicepipe/`` imports only the parts its row allows, and a
  stage imports no other stage.
- The sans-I/O cores (``core/``, ``speculative/``) import no torch, asyncio or sockets.
- No import cycle between voicepipe's modules.
- No private name (``from x import _y``) imported from another module.

Each check is also run on a small made-up tree that breaks it, so a check that could
not fail would fail here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "voicepipe"

# The parts a module belongs to: its first name under voicepipe/ (a package or a module).
BASE = {
    "frames", "stage", "pipeline", "config", "clock", "tracing", "registry", "audio", "tools",
    "logs", "otel",
}  # fmt: skip
# What each part may import of voicepipe (besides itself); docs/ARCHITECTURE.md's table.
# Parts not listed (bench, training, commands, cli, local_audio, roundtrip, __main__,
# the package itself) may import anything.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "speculative": {"core"},
    "nn": {"core", "speculative", "config", "registry"},
    "schedulers": {"core", "speculative", "nn", "config", "clock"},
    "stages": {"core", "speculative", "nn", "schedulers"} | BASE,
    "pipelines": {"stages"} | BASE,
    "server": {"core", "stages", "pipelines"} | BASE,
    "client": {"core", "config", "clock", "tracing", "audio"},
    "netsim": {"core", "clock"},
}
# The base modules depend on each other only downwards: frames, config, clock and
# registry are leaves for the stage and pipeline machinery above them.
ALLOWED["frames"] = {"clock"}
ALLOWED["clock"] = set()
ALLOWED["config"] = set()
ALLOWED["registry"] = {"config"}
ALLOWED["stage"] = {"frames", "clock"}
ALLOWED["pipeline"] = {"frames", "stage", "clock"}
ALLOWED["tracing"] = {"frames", "clock"}
ALLOWED["tools"] = {"core"}
ALLOWED["audio"] = set()
ALLOWED["logs"] = set()
ALLOWED["otel"] = {"tracing"}

PURE = ("core", "speculative")
PURE_FORBIDDEN = ("torch", "asyncio", "socket", "websockets")


@dataclass(frozen=True)
class Edge:
    src: str  # importing module, dotted
    line: int
    dst: str  # imported voicepipe module (resolved), or an outside name as written
    names: tuple[str, ...]  # the names a ``from`` import takes


def _module_name(root: Path, path: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(root: Path) -> dict[str, Path]:
    return {_module_name(root, p): p for p in sorted(root.rglob("*.py"))}


def _type_checking(node: ast.AST) -> bool:
    t = node.test if isinstance(node, ast.If) else None
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:`` (its ``else`` still runs)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child):
            for other in child.orelse:
                yield other
                yield from _walk(other)
            continue
        yield child
        yield from _walk(child)


def _edges(root: Path) -> list[Edge]:
    """Every import of every module under ``root``; ``from a import b`` names ``a.b``
    when that is a module, else ``a``."""
    mods = _modules(root)
    out = []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out += [Edge(name, node.lineno, a.name, ()) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    mod = node.module or ""
                names = tuple(a.name for a in node.names)
                subs = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in mods]
                rest = tuple(n for n in names if f"{mod}.{n}" not in mods)
                out += [Edge(name, node.lineno, s, ()) for s in subs]
                if rest or not subs:
                    out.append(Edge(name, node.lineno, mod, rest))
    return out


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _stage_of(module: str) -> str | None:
    """``voicepipe.stages.llm.tools`` → ``llm``: the stage a module is part of."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "stages" else None


def table_violations(root: Path) -> list[str]:
    pkg = root.name
    bad = []
    for e in _edges(root):
        if not (e.dst == pkg or e.dst.startswith(pkg + ".")):
            if _part(e.src) in PURE and any(
                e.dst == f or e.dst.startswith(f + ".") for f in PURE_FORBIDDEN
            ):
                bad.append(f"{e.src}:{e.line} imports {e.dst} (sans-I/O)")
            continue
        src, dst = _part(e.src), _part(e.dst)
        if dst and src in ALLOWED and src != dst and dst not in ALLOWED[src]:
            bad.append(f"{e.src}:{e.line} imports {e.dst} ({src} -> {dst})")
        a, b = _stage_of(e.src), _stage_of(e.dst)
        if a and b and a != b:
            bad.append(f"{e.src}:{e.line} imports {e.dst} (one stage imports another)")
    return bad


def cycles(root: Path) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (or a
    module importing itself): each is a cycle."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for e in _edges(root):
        if e.dst in mods:
            graph[e.src].add(e.dst)
    # Tarjan's algorithm, iterative (the graph is a few hundred modules deep at most).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph[v]:
                    out.append(sorted(comp))
    return out


def private_imports(root: Path) -> list[str]:
    pkg = root.name
    return [
        f"{e.src}:{e.line} imports {n} from {e.dst}"
        for e in _edges(root)
        if e.dst.startswith(pkg + ".") or e.dst == pkg
        for n in e.names
        if n.startswith("_") and not n.startswith("__")
    ]


def test_every_part_imports_only_what_its_row_allows() -> None:
    bad = table_violations(ROOT)
    assert not bad, "\n".join(bad)


def test_no_import_cycles() -> None:
    found = cycles(ROOT)
    assert not found, "\n".join(" <-> ".join(c) for c in found)


def test_no_private_name_is_imported_across_modules() -> None:
    bad = private_imports(ROOT)
    assert not bad, "\n".join(bad)


def test_the_source_is_read() -> None:
    # (a check over nothing passes too: the graph really has voicepipe's imports)
    edges = _edges(ROOT)
    assert any(e.src == "voicepipe.stages.llm.stage" and e.dst == "voicepipe.stage" for e in edges)
    assert len(_modules(ROOT)) > 100


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "voicepipe"
    for rel, text in {"__init__.py": "", **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        for parent in p.relative_to(root).parents:
            (root / parent / "__init__.py").touch()
        p.write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "want"),
    [
        ({"core/a.py": "def f():\n    from voicepipe.nn import llama\n"}, "core -> nn"),
        ({"core/a.py": "import asyncio.tasks\n"}, "sans-I/O"),
        ({"speculative/a.py": "from voicepipe.nn.llm import engine\n"}, "speculative -> nn"),
        ({"nn/a.py": "from voicepipe.stages import tts\n"}, "nn -> stages"),
        ({"server/a.py": "from voicepipe.nn import threads\n"}, "server -> nn"),
        ({"schedulers/a.py": "from ..stages import asr\n"}, "schedulers -> stages"),
        ({"pipelines/a.py": "from voicepipe.nn.asr import whisper\n"}, "pipelines -> nn"),
        ({"stages/a.py": "from voicepipe.server import app\n"}, "stages -> server"),
        ({"stages/tts.py": "from voicepipe.stages.llm.reply import Reply\n"}, "one stage"),
    ],
)
def test_the_table_catches_what_it_forbids(tmp_path: Path, files: dict, want: str) -> None:
    bad = table_violations(_tree(tmp_path, files))
    assert len(bad) == 1 and want in bad[0], bad


def test_the_table_lets_through_what_it_allows(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "stages/llm/stage.py": "from voicepipe.stages.llm import reply\nimport torch\n",
            "stages/llm/reply.py": "from voicepipe.frames import Frame\n",
            "server/a.py": "if TYPE_CHECKING:\n    from voicepipe.nn import llama\n",
        },
    )
    assert table_violations(root) == []


def test_a_cycle_is_found_even_through_a_lazy_import(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "bench/a.py": "from voicepipe.bench.b import x\n",
            "bench/b.py": "def f():\n    from voicepipe.bench import c\n",
            "bench/c.py": "from . import a\n",
            "bench/d.py": "if TYPE_CHECKING:\n    from voicepipe.bench import a\n",
            "bench/e.py": "from voicepipe.bench import d\n",
        },
    )
    assert cycles(root) == [["voicepipe.bench.a", "voicepipe.bench.b", "voicepipe.bench.c"]]


def test_a_private_import_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "bench/a.py": "from voicepipe.bench.e2e import _pcts, levels, __doc__\n",
            "bench/e2e.py": "",
            "bench/b.py": "from ._progress import Bar\n",  # a private module is fine
        },
    )
    assert private_imports(root) == ["voicepipe.bench.a:1 imports _pcts from voicepipe.bench.e2e"]
