"""`voicepipe …` command line.

Each subcommand lives in its own module under ``voicepipe/commands/`` and
exposes ``register(subparsers)``; ``bench`` and ``train`` collect their
sub-subcommands the same way from ``voicepipe/bench/`` and
``voicepipe/training/`` (modules defining ``register``). Command modules
import heavy libraries inside their handlers so that ``--help`` stays fast.

Every subcommand accepts config overrides ``--section.key=value`` and
``--config FILE``; handlers receive them as ``args.config`` (a loaded
``voicepipe.config.Config``).
"""

from __future__ import annotations

import os

# Before anything imports torch: OpenMP threads that spin while idle steal the other
# core from ASR, LLM and vocoder sharing two cores (measured: 2 torch threads were slower
# than 1 on a busy machine without this).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import importlib
import logging
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

from voicepipe import __version__, config


def _modules(package: str) -> list[ModuleType | _Missing]:
    pkg = importlib.import_module(package)
    mods: list[ModuleType | _Missing] = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        # Importing a library module (training code importing torch) just to find it has no
        # command would cost seconds on every invocation; read its source first.
        src = Path(pkg.__path__[0]) / f"{info.name}.py"
        if src.is_file() and "def register(" not in src.read_text(encoding="utf-8"):
            continue
        try:
            mod = importlib.import_module(f"{package}.{info.name}")
        except ModuleNotFoundError as e:
            if e.name is None or e.name.split(".")[0] == "voicepipe":
                raise
            # Before the install has finished (set-up runs `models pull` from a bare venv
            # while pip installs the rest), a command whose module needs a library not yet
            # there is listed with what it lacks instead of breaking every other command.
            mods.append(_Missing(info.name, e.name))
            continue
        if hasattr(mod, "register"):
            mods.append(mod)
    return mods


class _Missing:
    """A subcommand whose module could not be imported for want of a library."""

    def __init__(self, name: str, library: str) -> None:
        self.name, self.library = name, library

    def register(self, sub: argparse._SubParsersAction) -> None:
        why = f"needs {self.library}, which is not installed here; run: make setup"
        p = sub.add_parser(self.name.replace("_", "-"), help=why, description=why)
        p.set_defaults(func=lambda _args: print(f"voicepipe: {self.name} {why}") or 2)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="voicepipe",
        description=(
            "Real-time voice assistant pipeline: streaming ASR → speculative LLM → "
            "speculative audio-token TTS → jitter-buffered playback over WebSockets. "
            "Every subcommand takes --config FILE and overrides like --llm.spec_k=4."
        ),
    )
    parser.add_argument("--version", action="version", version=f"voicepipe {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _modules("voicepipe.commands"):
        mod.register(sub)
    for name, package, help_text in (
        ("bench", "voicepipe.bench", "measure speed/quality, print JSON"),
        ("train", "voicepipe.training", "generate data and train the project's models"),
    ):
        p = sub.add_parser(name, help=help_text, description=help_text)
        group = p.add_subparsers(dest=f"{name}_command", metavar="WHAT")
        for mod in _modules(package):
            mod.register(group)
        p.set_defaults(func=lambda args, p=p: p.print_help() or 2)
    return parser


def add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", dest="config_file", default=None, help="TOML config file")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        rest, overrides = config.split_overrides(argv)
    except config.ConfigError as e:
        print(f"voicepipe: {e}", file=sys.stderr)
        return 2
    parser = build_parser()
    args, unknown = parser.parse_known_args(rest)
    config_file = None
    if "--config" in unknown:
        i = unknown.index("--config")
        if i + 1 >= len(unknown):
            parser.error("--config needs a FILE")
        config_file = unknown[i + 1]
        del unknown[i : i + 2]
    config_file = getattr(args, "config_file", None) or config_file
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        args.config = config.load(config_file, overrides)
    except config.ConfigError as e:
        print(f"voicepipe: config error: {e}", file=sys.stderr)
        return 2
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except config.ConfigError as e:  # e.g. a bench's --variant overrides
        print(f"voicepipe: config error: {e}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
