"""`voicepipe client`: stream a WAV to a server, play/record the replies, report latency."""

from __future__ import annotations

import argparse
import sys

from voicepipe.cli import add_config_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "client",
        help="headless client and load driver: stream a WAV, record replies, print latency",
        description=(
            "Streams IN.wav to a voicepipe server at real time (or --speed times faster) "
            "in 20 ms frames, then ~1 s of silence so endpointing can fire, then 'end'. "
            "Replies are played through a playout buffer by a virtual speaker at real time. "
            "With --json prints one JSON object per session: transcript, reply_text, "
            "reply_audio_s, latency_ms (server spans + e2e.voice_to_voice measured here), "
            "jitter (playout counters). --concurrency N runs N sessions at once."
        ),
    )
    add_config_arg(p)
    p.add_argument("--url", default=None, help="ws://HOST:PORT/ws (default: from [server])")
    p.add_argument("--wav", required=True, help="input speech, any rate 8-48 kHz (mono or not)")
    p.add_argument(
        "--out",
        default=None,
        metavar="REPLY.wav",
        help="write the received reply audio (with N>1 sessions: REPLY-i.wav)",
    )
    p.add_argument("--speed", type=float, default=1.0, help="send speed, 1.0 = real time")
    p.add_argument("--concurrency", type=int, default=1, help="sessions at once (load test)")
    p.add_argument("--json", action="store_true", help="one JSON object per session")
    p.add_argument(
        "--trace",
        default=None,
        metavar="FILE",
        help="write spans: .json = Chrome trace, else JSONL",
    )
    p.add_argument("--token", default=None, help="auth token (default: server.auth_token)")
    p.add_argument(
        "--output-rate",
        type=int,
        default=0,
        help="ask for reply audio at this rate (default: the server's)",
    )
    p.add_argument(
        "--playout",
        choices=("fifo", "adaptive"),
        default="adaptive",
        help="playout buffer of the virtual speaker: adaptive (the jitter buffer "
        "of core/playout/jitter.py, default) or fifo (fixed start delay)",
    )
    p.add_argument("--silence", type=float, default=1.0, help="trailing silence, seconds")
    p.add_argument(
        "--barge-in",
        default=None,
        metavar="WAV",
        help="after the first reply has played --barge-in-after seconds, speak this "
        "WAV over it (tests interruption)",
    )
    p.add_argument(
        "--barge-in-after",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds of reply played before the barge-in starts (default 1.0)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds to wait for replies after the input was sent",
    )
    p.add_argument(
        "--reconnect",
        type=int,
        default=3,
        metavar="N",
        help="a session lost before it was done (server or replica gone: close 1001, 1006 "
        "or 1012) starts again on a new connection, at most N times (default 3; 0: never)",
    )
    p.add_argument(
        "--unavailable-wait",
        type=float,
        default=60.0,
        metavar="S",
        help="a handshake answered 503 (the server's models still loading, a Ray replica "
        "still starting) is tried again after its Retry-After or with backoff, for at most "
        "S seconds in all (default 60)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json
    from pathlib import Path

    from voicepipe.audio import read_wav, resample
    from voicepipe.client import run_sessions
    from voicepipe.tracing import Tracer, format_summary

    cfg = args.config
    if args.concurrency < 1 or args.speed <= 0:
        print("voicepipe client: --concurrency ≥ 1 and --speed > 0", file=sys.stderr)
        return 2
    try:
        pcm, sr = read_wav(args.wav)
        barge = None
        if args.barge_in:
            bpcm, bsr = read_wav(args.barge_in)
            barge = resample(bpcm, bsr, sr)
    except (OSError, ValueError, EOFError) as e:
        print(f"voicepipe client: cannot read {args.barge_in or args.wav}: {e}", file=sys.stderr)
        return 2
    url = args.url or f"ws://{cfg.server.host}:{cfg.server.port}/ws"
    tracer = Tracer(args.trace)
    results = asyncio.run(
        run_sessions(
            url,
            pcm,
            sr,
            cfg,
            concurrency=args.concurrency,
            tracer=tracer,
            speed=args.speed,
            output_sample_rate=args.output_rate,
            token=cfg.server.auth_token if args.token is None else args.token,
            playout=args.playout,
            trailing_silence_s=args.silence,
            timeout_s=args.timeout,
            barge_in=barge,
            barge_in_after_s=args.barge_in_after,
            reconnect=args.reconnect,
            unavailable_wait_s=args.unavailable_wait,
        )
    )
    for r in results:
        if args.out and r.output_sample_rate:
            out = Path(args.out)
            if len(results) > 1:
                out = out.with_name(f"{out.stem}-{r.index}{out.suffix}")
            _write_pcm16(out, r.reply_audio(), r.output_sample_rate)
        obj = r.to_json()
        if args.json:
            print(json.dumps(obj), flush=True)
        else:
            status = "ok" if obj["ok"] else f"FAILED ({obj['error']})"
            print(f"session {r.index} {r.session_id}: {status}")
            print(f"  transcript: {obj['transcript']!r}")
            print(f"  reply:      {obj['reply_text']!r} ({obj['reply_audio_s']:.2f} s audio)")
            for k, v in obj["latency_ms"].items():
                print(f"  {k:<22} {v:9.1f} ms")
            print("  jitter: " + ", ".join(f"{k}={v:g}" for k, v in obj["jitter"].items()))
    if not args.json and len(results) > 1:
        print(format_summary(tracer.summary()))
    if args.trace:
        tracer.save()
    return 0 if all(r.to_json()["ok"] for r in results) else 1


def _write_pcm16(path: object, pcm16: object, rate: int) -> None:
    """The received samples exactly as they came off the wire (no float round trip)."""
    import wave
    from pathlib import Path

    import numpy as np

    p = Path(str(path))
    p.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(p), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(pcm16, dtype="<i2").tobytes())
