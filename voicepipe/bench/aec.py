"""`voicepipe bench aec`: what a well-kept echo canceller (speexdsp) leaves of the echo.

Offline, on the echo path `bench turns` simulates (core/playout/room.py: gain, delay, a
room response): the assistant's speech (clips of the turns set, spoken by espeak-ng
voices) is played, comes back into the mic, and speexdsp's adaptive echo canceller
(Debian ``libspeexdsp1``, through ctypes: PyPI's ``speexdsp`` has no wheel and
``webrtc-audio-processing`` none at all) with its residual-echo suppressor removes what
it can, given the exact reference signal. Reports per path: echo return loss
enhancement (ERLE, dB, after the first second of adaptation), the share of 32 ms chunks
Silero's VAD calls speech in the mic before and after, and with the user talking over
the echo, how much of the user's speech power survives (dB). A server-side canceller
would also have to find the path delay (the client's playout buffer and the network sit
between the server's reference and the mic); here it is given, so these figures are an
upper bound of what it could do.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

SR = 16000
FRAME = 160  # 10 ms
FILTER_MS = 250  # the canceller's tail: longer than path delay + room response
PATHS = ((-6.0, 30.0), (-10.0, 50.0), (-20.0, 120.0))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "aec",
        help="speexdsp's echo canceller on bench turns' simulated echo path (offline)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print JSON (default: a table)")
    p.set_defaults(func=run)


def cancel(mic: np.ndarray, ref: np.ndarray, *, suppress: bool = True) -> np.ndarray:
    """speexdsp's echo canceller (+ its residual-echo suppressor) on 16 kHz float audio:
    the server's own (voicepipe.audio.EchoCanceller), run offline."""
    from voicepipe.audio import EchoCanceller

    aec = EchoCanceller(SR, FILTER_MS)
    n = (min(len(mic), len(ref)) // FRAME) * FRAME
    out = np.zeros(n, np.float32)
    try:
        for i in range(0, n, FRAME):
            cancelled, suppressed = aec.process(mic[i : i + FRAME], ref[i : i + FRAME])
            out[i : i + FRAME] = suppressed if suppress else cancelled
    finally:
        aec.close()
    return out


def _speech_share(pcm: np.ndarray) -> float:
    from voicepipe.nn.asr.vad import SileroVad

    probs = SileroVad().feed(np.asarray(pcm, np.float32))
    return round(float(np.mean(np.asarray(probs) >= 0.5)), 3) if len(probs) else 0.0


def _db(x: float) -> float:
    return round(10 * np.log10(max(x, 1e-12)), 1)


def measure() -> list[dict[str, Any]]:
    from voicepipe.bench import voices as V
    from voicepipe.bench.turns_set import load
    from voicepipe.core.playout.room import EchoPath, room_ir

    clips = load()
    reply = V.join([c.pcm for c in clips if c.kind == "complete"], 0.3)
    user = next(c.pcm for c in clips if c.kind == "interruption")
    skip = SR  # the canceller's first second: it adapts
    rows = []
    for gain, delay in PATHS:
        path = EchoPath(gain_db=gain, delay_ms=delay, in_rate=SR, out_rate=SR, ir=room_ir(SR))
        for i in range(0, len(reply), FRAME):
            path.played(reply[i : i + FRAME])
        echo = path.take(len(reply))
        at = len(reply) // 2  # the user talks over the second half
        talk = np.zeros(len(reply), np.float32)
        talk[at : at + len(user)] = user[: len(reply) - at]
        alone = cancel(echo, reply)
        both = cancel(echo + talk, reply)
        e_in = float(np.mean(echo[skip:at] ** 2))
        e_out = float(np.mean(alone[skip:at] ** 2))
        span = slice(at, at + len(user))
        kept = float(np.mean(both[span] ** 2)) / float(np.mean(talk[span] ** 2) + 1e-12)
        rows.append(
            {
                "gain_db": gain,
                "delay_ms": delay,
                "erle_db": _db(e_in / max(e_out, 1e-12)),
                "vad_speech_share_echo": _speech_share(echo[skip:at]),
                "vad_speech_share_after_aec": _speech_share(alone[skip:at]),
                "user_power_kept_db": _db(kept),
            }
        )
    return rows


def run(args: argparse.Namespace) -> int:
    rows = measure()
    if args.json:
        print(json.dumps({"filter_ms": FILTER_MS, "rows": rows}, indent=1))
    else:
        for r in rows:
            print(", ".join(f"{k}={v}" for k, v in r.items()))
    return 0
