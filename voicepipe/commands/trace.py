"""`voicepipe trace summarize | chrome`: read span files written with --trace."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trace",
        help="summarize or convert latency traces (JSONL or Chrome trace JSON)",
        description=(
            "Span files come from `voicepipe serve --trace FILE` or `voicepipe client "
            "--trace FILE` (JSONL, or Chrome trace JSON when FILE ends in .json; both are "
            "read here). Span names: DESIGN.md §9."
        ),
    )
    sub2 = p.add_subparsers(dest="trace_command", metavar="ACTION")
    ps = sub2.add_parser("summarize", help="p50/p95/p99 per span name")
    ps.add_argument("file", help="trace file (JSONL or Chrome JSON)")
    ps.add_argument("--json", action="store_true", help="print a JSON object instead")
    pc = sub2.add_parser("chrome", help="convert to Chrome trace JSON (open in Perfetto)")
    pc.add_argument("file", help="trace file (JSONL or Chrome JSON)")
    pc.add_argument("out", help="output .json")
    p.set_defaults(func=run, trace_command=None)


def run(args: argparse.Namespace) -> int:
    import json

    from voicepipe import tracing

    if args.trace_command is None:
        print("voicepipe trace: choose summarize or chrome (see --help)", file=sys.stderr)
        return 2
    try:
        spans = tracing.load(args.file)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"voicepipe trace: cannot read {args.file}: {e}", file=sys.stderr)
        return 2
    if args.trace_command == "chrome":
        tracing.write_chrome(args.out, spans)
        print(f"{len(spans)} spans → {args.out}")
        return 0
    summary = tracing.summarize(spans)
    if args.json:
        print(json.dumps(summary, indent=2))
    elif not summary:
        print("no spans")
    else:
        print(tracing.format_summary(summary))
    return 0
