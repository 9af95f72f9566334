"""Regenerate tests/data/jitter_vectors.json from the Python playout buffer.

    .venv/bin/python tests/data/make_jitter_vectors.py

The vectors pin the algorithm: tests/core/playout/test_jitter.py replays them through
voicepipe/core/playout/jitter.py and web/test/jitter.test.js through web/jitter.js; both
must reproduce every output sample (sha256), every decision and every counter.
Change both implementations together, then run this. The source signal (real
speech from the hibari teacher TTS) is kept from the existing file if present.
"""

from __future__ import annotations

import base64
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from voicepipe.bench import playout_sim as ps
from voicepipe.core.playout.faults import FaultSpec
from voicepipe.core.playout.jitter import JitterParams

OUT = Path(__file__).resolve().parent / "jitter_vectors.json"
SR = 16000
FRAME = SR // 50  # 20 ms
MS = 1_000_000


def speech_source() -> np.ndarray:
    if OUT.exists():
        data = json.loads(OUT.read_text())
        return np.frombuffer(base64.b64decode(data["source"]["pcm16_b64"]), dtype="<i2").copy()
    from hibari.tts import Hibari

    from voicepipe.audio import resample

    audio = Hibari()("Playback should sound smooth, even when the network does not.", seed=0)
    pcm = resample(np.asarray(audio, dtype=np.float32), 24000, SR)[: 3 * SR]
    return np.clip(np.round(pcm * 32767), -32768, 32767).astype(np.int16)


def cases() -> list[tuple[str, dict, list[list]]]:
    out = []

    def net(name: str, spec: FaultSpec, n: int, pull: int, **kw: object):
        frames = ps.through_network(ps.frames_for_reply(1, 0, 0, n, FRAME), SR, spec)
        t_end = max(f.arrival_ns for f in frames) + 500 * MS
        out.append((name, kw, ps.build_events(frames, SR, pull, t_end)))

    net("steady", FaultSpec(), 100, 320)
    net("jitter_40pm20_worklet", FaultSpec(delay_ms=40, jitter_ms=20, seed=1), 150, 128)
    net(
        "stalls_250_every_1s",
        FaultSpec(delay_ms=40, jitter_ms=20, stall_ms=250, stall_every_s=1.0, seed=2),
        250,
        320,
    )

    # speculative decoding: clauses of 4–12 frames produced in bursts, sometimes slower
    # than real time
    rng = np.random.default_rng(3)
    produce, t = [], 150 * MS
    while len(produce) < 150:
        k = int(rng.integers(4, 13))
        produce += [t] * k
        t += int(k * 20 * MS * float(rng.uniform(0.6, 1.3)))
    frames = ps.through_network(
        ps.frames_for_reply(1, 0, 0, 150, FRAME), SR, FaultSpec(), produce_ns=produce[:150]
    )
    out.append(
        (
            "bursty_speculative",
            {},
            ps.build_events(frames, SR, 320, max(f.arrival_ns for f in frames) + 500 * MS),
        )
    )

    frames = ps.through_network(
        ps.frames_for_reply(1, 0, 0, 150, FRAME), SR, FaultSpec(delay_ms=30, jitter_ms=10, seed=4)
    )
    frames = ps.drop(frames, 0.06, seed=5)
    out.append(("lossy_6pct", {}, ps.build_events(frames, SR, 256, 3500 * MS)))

    frames = ps.through_network(
        ps.frames_for_reply(1, 0, 0, 150, FRAME), SR, FaultSpec(delay_ms=30, jitter_ms=10, seed=6)
    )
    frames = ps.duplicate(
        ps.reorder(frames, 0.15, seed=7, max_shift_ns=50 * MS), 0.05, seed=8, shift_ns=15 * MS
    )
    out.append(("reordered_duplicated", {}, ps.build_events(frames, SR, 320, 3500 * MS)))

    # two replies on one continuous timeline, the first cut by a barge-in
    f1 = ps.through_network(
        ps.frames_for_reply(1, 0, 0, 80, FRAME), SR, FaultSpec(delay_ms=20, jitter_ms=10, seed=9)
    )
    cut = 900 * MS
    f1 = [f for f in f1 if f.arrival_ns < cut]
    f2 = ps.through_network(
        ps.frames_for_reply(3, 80, 80 * FRAME + SR, 60, FRAME, src0=8000),
        SR,
        FaultSpec(delay_ms=20, jitter_ms=10, seed=10),
    )
    out.append(
        (
            "barge_in_two_replies",
            {"start_margin_ms": 10},
            ps.build_events(
                f1 + f2,
                SR,
                128,
                max(f.arrival_ns for f in f2) + 300 * MS,
                extra=[["clear", cut, 1]],
            ),
        )
    )

    # slower than real time: the buffer must conceal, then recover
    produce = [150 * MS + int(i * 26 * MS) for i in range(100)]
    frames = ps.through_network(
        ps.frames_for_reply(1, 0, 0, 100, FRAME), SR, FaultSpec(), produce_ns=produce
    )
    out.append(
        (
            "slow_producer",
            {"max_delay_ms": 120},
            ps.build_events(frames, SR, 320, max(f.arrival_ns for f in frames) + 300 * MS),
        )
    )
    return out


def main() -> int:
    source = speech_source()
    vectors = {
        "about": "Arrival traces for the playout buffer; see tests/data/make_jitter_vectors.py",
        "version": 1,
        "source": {
            "sample_rate": SR,
            "pcm16_b64": base64.b64encode(source.astype("<i2").tobytes()).decode(),
        },
        "cases": [],
    }
    for name, overrides, events in cases():
        params = JitterParams(sample_rate=SR, **overrides)
        rep = ps.replay(events, params, source)
        vectors["cases"].append(
            {
                "name": name,
                "params": asdict(params),
                "events": events,
                "expected": {
                    "out_len": len(rep.out),
                    "out_sha256": rep.sha256(),
                    "ops": rep.ops,
                    "stats": rep.stats,
                    "playouts": rep.playouts,
                },
            }
        )
        print(f"{name}: {rep.stats}", file=sys.stderr)
    OUT.write_text(json.dumps(vectors, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
