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
            "read here). Span names: docs/DESIGN.md §9."
        ),
    )
    sub2 = p.add_subparsers(dest="trace_command", metavar="ACTION")
    ps = sub2.add_parser("summarize", help="p50/p95/p99 per span name")
    ps.add_argument("file", help="trace file (JSONL or Chrome JSON)")
    ps.add_argument("--json", action="store_true", help="print a JSON object instead")
    pc = sub2.add_parser("chrome", help="convert to Chrome trace JSON (open in Perfetto)")
    pc.add_argument("file", help="trace file (JSONL or Chrome JSON)")
    pc.add_argument("out", help="output .json")
    pw = sub2.add_parser("waterfall", help="one PNG per turn: its spans on a time axis")
    pw.add_argument("file", help="trace file (JSONL or Chrome JSON)")
    pw.add_argument("outdir", help="folder for <session>-turn<N>.png")
    pw.add_argument("--turn", type=int, default=None, help="only this turn")
    pp = sub2.add_parser("plot", help="per-turn waterfalls stacked in one PNG")
    pp.add_argument("file", help="trace file (JSONL or Chrome JSON)")
    pp.add_argument("--out", default="waterfall.png", help="output PNG (default waterfall.png)")
    pp.add_argument("--turn", type=int, default=None, help="only this turn")
    pp.add_argument("--last", type=int, default=8, help="at most this many turns, newest")
    p.set_defaults(func=run, trace_command=None)


def run(args: argparse.Namespace) -> int:
    import json

    from voicepipe import tracing

    if args.trace_command is None:
        print(
            "voicepipe trace: choose summarize, chrome, waterfall or plot (see --help)",
            file=sys.stderr,
        )
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
    if args.trace_command == "plot":
        n = plot(spans, args.out, args.turn, args.last)
        print(f"{n} turn(s) → {args.out}")
        return 0 if n else 1
    if args.trace_command == "waterfall":
        written = waterfalls(spans, args.outdir, args.turn)
        print(f"{len(written)} waterfall(s) → {args.outdir}")
        return 0 if written else 1
    summary = tracing.summarize(spans)
    if args.json:
        print(json.dumps(summary, indent=2))
    elif not summary:
        print("no spans")
    else:
        print(tracing.format_summary(summary))
    return 0


def waterfalls(spans: list, outdir: str, only_turn: int | None = None) -> list[str]:
    """One PNG per (session, turn): each span a bar from its start, in ms from the turn's
    first span; §9 names in pipeline order, others after."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _groups(spans, only_turn)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for (session, turn), group in sorted(groups.items()):
        fig, ax = plt.subplots(figsize=(8, 0.45 * len(group) + 1.2))
        _draw_turn(ax, group, f"session {session or '-'} · turn {turn}")
        fig.tight_layout()
        path = out / f"{session or 'session'}-turn{turn}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(str(path))
    return written


def _groups(spans: list, only_turn: int | None) -> dict[tuple[str, int], list]:
    groups: dict[tuple[str, int], list] = {}
    for s in spans:
        if only_turn is None or s.turn_id == only_turn:
            groups.setdefault((s.session, s.turn_id), []).append(s)
    return groups


def _draw_turn(ax, group: list, title: str) -> None:
    """One turn's spans as bars from their start, §9 names in pipeline order, others after."""
    from voicepipe.tracing import SPAN_NAMES

    rank = {n: i for i, n in enumerate(SPAN_NAMES)}
    group = sorted(group, key=lambda s: (rank.get(s.name, len(rank)), s.start_ns))
    t0 = min(s.start_ns for s in group)
    for i, s in enumerate(group):
        start = (s.start_ns - t0) / 1e6
        ax.barh(i, max(s.duration_ms, 0.5), left=start, color=f"C{rank.get(s.name, 9) % 10}")
        ax.text(
            start + max(s.duration_ms, 0.5), i, f" {s.duration_ms:.0f} ms", va="center", fontsize=8
        )
    ax.set_yticks(range(len(group)), [s.name for s in group])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the turn's first span")
    ax.set_title(title)


def plot(spans: list, out: str, only_turn: int | None = None, last: int = 8) -> int:
    """Every turn (the newest ``last``) as one waterfall panel, stacked in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = sorted(
        _groups(spans, only_turn).items(), key=lambda kv: min(s.start_ns for s in kv[1])
    )[-max(1, last) :]
    if not items:
        return 0
    heights = [0.45 * len(g) + 1.0 for _, g in items]
    fig, axes = plt.subplots(
        len(items),
        1,
        figsize=(9, sum(heights) + 0.5),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for ax, ((session, turn), group) in zip(axes[:, 0], items, strict=True):
        _draw_turn(ax, group, f"session {session or '-'} · turn {turn}")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return len(items)
