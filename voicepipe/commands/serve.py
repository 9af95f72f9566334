"""`voicepipe serve`: the WebSocket server (/ws), the browser page and the OpenAI-compatible
/v1 endpoints on one port."""

from __future__ import annotations

import argparse
import sys

from voicepipe.cli import add_config_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run the voice server (WebSocket /ws + the web/ page)",
        description=(
            "Serve voice sessions over WebSocket at ws://HOST:PORT/ws (protocol: "
            "docs/PROTOCOL.md) and the browser page of web/ at http://HOST:PORT/. "
            "Each session runs its own pipeline (voicepipe/pipelines/<name>.py). The same "
            "port serves OpenAI's Chat Completions on the configured LLM at "
            "http://HOST:PORT/v1 (GET /v1/models, POST /v1/chat/completions). "
            "Limits, auth token and allowed origins come from [server] in the config. "
            "Ctrl-C (SIGINT) or SIGTERM stops accepting, lets replies in flight finish "
            "(at most server.drain_timeout_s), closes the rest with 1001 and exits 0; a "
            "second Ctrl-C closes them at once. Listening beyond loopback? Set "
            "server.auth_token (the security defaults: docs/PROTOCOL.md)."
        ),
    )
    add_config_arg(p)
    p.add_argument("--host", default=None, help="interface to bind (default: server.host)")
    p.add_argument(
        "--port", type=int, default=None, help="TCP port, 0 = any free port (default: server.port)"
    )
    p.add_argument(
        "--pipeline",
        default=None,
        help="pipeline name, e.g. assistant or loopback (default: server.pipeline)",
    )
    p.add_argument(
        "--trace",
        default=None,
        metavar="FILE",
        help="write spans after each session and at shutdown: .json = Chrome trace, else JSONL",
    )
    p.add_argument(
        "--ray",
        action="store_true",
        help="run the pipeline as Ray Serve replicas behind Serve's proxy on HOST:PORT, "
        "autoscaled between ray.min_replicas and ray.max_replicas ([ray] in the config; "
        "docs/DEPLOY.md)",
    )
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="log lines as text (default) or one JSON object per line, with a key per "
        "field of the session and turn lines (docs/CLI.md)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from voicepipe import logs
    from voicepipe.config import ConfigError
    from voicepipe.pipelines import PipelineError
    from voicepipe.tools import ToolError

    logs.use(args.log_format)
    try:
        return asyncio.run(_serve_ray(args) if args.ray else _serve(args))
    except (PipelineError, ToolError) as e:
        print(f"voicepipe serve: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"voicepipe serve: cannot listen: {e}", file=sys.stderr)
        return 1
    except ConfigError as e:
        print(f"voicepipe serve: {e}", file=sys.stderr)
        return 2


async def _serve_ray(args: argparse.Namespace) -> int:
    import asyncio
    import os
    import signal

    from voicepipe import pipelines
    from voicepipe.server import ray_proxy

    cfg = args.config
    # Serve reads its switches when it is imported, in this process too.
    os.environ.update(ray_proxy.serve_env(cfg.ray))
    from voicepipe.server import ray_serve

    pipeline = args.pipeline or cfg.server.pipeline
    pipelines.load(pipeline)  # a bad name fails here, not in every replica
    host = args.host if args.host is not None else cfg.server.host
    port = args.port if args.port is not None else cfg.server.port
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    where = cfg.ray.address or "a Ray head started here"
    print(f"voicepipe: starting pipeline {pipeline} on Ray Serve ({where}) …",
          file=sys.stderr, flush=True)  # fmt: skip

    def ready() -> None:
        print(
            f"voicepipe: serving http://{host}:{port}/  (WebSocket ws://{host}:{port}/ws, "
            f"pipeline {pipeline}, Ray Serve, {cfg.ray.min_replicas}-{cfg.ray.max_replicas} "
            "replicas)",
            flush=True,
        )

    await ray_serve.run(cfg, pipeline, host, port, stop, ready=ready, log_format=args.log_format)
    return 0


async def _serve(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from voicepipe.server.app import Server

    server = Server(
        args.config, pipeline=args.pipeline, host=args.host, port=args.port, trace=args.trace
    )
    # Preloading the pipeline's models takes seconds (a minute for a model packed for the
    # first time): say so on stderr; stdout's first line stays the URL line.
    print(f"voicepipe: starting pipeline {server.pipeline_name}: loading its models …",
          file=sys.stderr, flush=True)  # fmt: skip
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"voicepipe: serving {server.url}  (WebSocket {server.ws_url}, "
        f"pipeline {server.pipeline_name})",
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        print(
            f"voicepipe: shutting down: no new sessions; replies in flight may finish "
            f"(at most {args.config.server.drain_timeout_s:g} s; Ctrl-C again to cut them)",
            file=sys.stderr,
            flush=True,
        )
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, server.hurry)
        await server.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    if server.tracer.path is not None:
        print(f"voicepipe: trace written to {server.tracer.path}", file=sys.stderr)
    return 0
