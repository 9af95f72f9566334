"""`voicepipe talk`: talk to the assistant through this computer's microphone and speaker."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from voicepipe.cli import add_config_arg

NO_DEVICE = (
    "voicepipe talk: no audio {what} device found (PortAudio sees {n} device(s)). "
    "Plug in a microphone and speaker, or talk through the browser page instead: "
    "`voicepipe serve` and open http://127.0.0.1:8765/ ; for a WAV file use "
    "`voicepipe client --wav IN.wav`."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "talk",
        help="talk through the local microphone and speaker (needs the 'local' extra)",
        description=(
            "Captures the default microphone and plays replies on the default speaker "
            "through the adaptive playout buffer, over the same WebSocket protocol as the "
            "browser page. Without --url it starts the pipeline in this process (like "
            "`voicepipe serve --pipeline NAME` on a free local port). Needs sounddevice "
            "(pip install 'voicepipe[local]') and PortAudio (apt-get install libportaudio2). "
            "Ctrl-C ends the conversation."
        ),
    )
    add_config_arg(p)
    p.add_argument("--url", default=None, help="ws://HOST:PORT/ws of a running server")
    p.add_argument(
        "--pipeline", default=None, help="pipeline to run in-process (default: server.pipeline)"
    )
    p.add_argument("--input-device", default=None, help="sounddevice input device (name or id)")
    p.add_argument("--output-device", default=None, help="sounddevice output device")
    p.add_argument("--rate", type=int, default=16000, help="microphone sample rate")
    p.set_defaults(func=run)


def check_devices(sd: Any, input_device: Any = None, output_device: Any = None) -> str | None:
    """None when a usable input and output device exist, else the message to print."""
    try:
        n = len(sd.query_devices())
    except Exception:  # PortAudio itself failed to enumerate
        n = 0
    for what, kind, dev in (("input", "input", input_device), ("output", "output", output_device)):
        try:
            info = sd.query_devices(dev, kind=kind)
        except (sd.PortAudioError, ValueError):
            return NO_DEVICE.format(what=what, n=n)
        if not info or info.get(f"max_{kind}_channels", 0) < 1:
            return NO_DEVICE.format(what=what, n=n)
    return None


def run(args: argparse.Namespace) -> int:
    try:
        import sounddevice as sd
    except ImportError:
        print(
            "voicepipe talk: sounddevice is not installed: pip install 'voicepipe[local]'",
            file=sys.stderr,
        )
        return 1
    except OSError as e:  # the PortAudio shared library is missing
        print(
            f"voicepipe talk: PortAudio is missing ({e}): apt-get install libportaudio2",
            file=sys.stderr,
        )
        return 1
    problem = check_devices(sd, _dev(args.input_device), _dev(args.output_device))
    if problem:
        print(problem, file=sys.stderr)
        return 1
    import asyncio

    from voicepipe.local_audio import talk

    try:
        return asyncio.run(
            talk(
                args.config,
                sd,
                url=args.url,
                pipeline=args.pipeline,
                rate=args.rate,
                input_device=_dev(args.input_device),
                output_device=_dev(args.output_device),
            )
        )
    except KeyboardInterrupt:
        return 0


def _dev(d: str | None) -> int | str | None:
    return int(d) if d is not None and d.isdigit() else d
