"""`voicepipe netsim`: a TCP proxy that adds delay, jitter and periodic stalls."""

from __future__ import annotations

import argparse
import sys

from voicepipe.cli import add_config_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "netsim",
        help="fault-injecting TCP proxy (delay, jitter, stalls) for testing on loopback",
        description=(
            "Listens on --listen and forwards every connection to --upstream, holding each "
            "chunk back by --delay-ms ± --jitter-ms (uniform, seeded) without reordering, "
            "and letting nothing through for --stall-ms every --stall-every-s seconds "
            "(counted from each connection's start). That is how TCP presents jitter and "
            "packet loss to a WebSocket. Example: voicepipe serve --pipeline loopback & "
            "voicepipe netsim --listen 127.0.0.1:9000 --upstream 127.0.0.1:8765 "
            "--delay-ms 40 --jitter-ms 20 --stall-ms 250 --stall-every-s 5, then "
            "voicepipe client --url ws://127.0.0.1:9000/ws --wav IN.wav --json."
        ),
    )
    add_config_arg(p)
    p.add_argument("--listen", required=True, metavar="HOST:PORT", help="where clients connect")
    p.add_argument("--upstream", required=True, metavar="HOST:PORT", help="the real server")
    p.add_argument("--delay-ms", type=float, default=0.0, help="mean added delay per chunk")
    p.add_argument("--jitter-ms", type=float, default=0.0, help="± uniform spread of the delay")
    p.add_argument("--stall-ms", type=float, default=0.0, help="length of each stall")
    p.add_argument("--stall-every-s", type=float, default=0.0, help="stall period (0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the jitter")
    p.add_argument(
        "--direction",
        choices=("both", "up", "down"),
        default="both",
        help="faults on client→server (up), server→client (down) or both",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json
    import signal

    from voicepipe.core.playout.faults import FaultSpec
    from voicepipe.netsim import NetSim, parse_hostport

    try:
        listen, upstream = parse_hostport(args.listen), parse_hostport(args.upstream)
        spec = FaultSpec(
            args.delay_ms, args.jitter_ms, args.stall_ms, args.stall_every_s, args.seed
        )
    except ValueError as e:
        print(f"voicepipe netsim: {e}", file=sys.stderr)
        return 2

    async def main() -> int:
        sim = NetSim(listen, upstream, spec, args.direction)
        try:
            host, port = await sim.start()
        except OSError as e:
            print(f"voicepipe netsim: cannot listen on {args.listen}: {e}", file=sys.stderr)
            return 1
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(
            f"voicepipe netsim: {host}:{port} → {upstream[0]}:{upstream[1]} "
            f"(delay {spec.delay_ms} ± {spec.jitter_ms} ms, stall {spec.stall_ms} ms every "
            f"{spec.stall_every_s} s, {args.direction})",
            flush=True,
        )
        await stop.wait()
        await sim.close()
        print(json.dumps(sim.stats.as_dict()), file=sys.stderr)
        return 0

    return asyncio.run(main())
