"""`voicepipe bench tts-batch`: N sessions speaking at once, batched TTS or each alone.

N sessions (1, 2, 4, … up to ``--sessions``) each speak one reply of the held-out
reply set (its first ``--chunks`` chunks, handed to the TTS stage the way the LLM
stage hands them), starting ``--stagger-ms`` apart, in one process over one shared
codec LM: first with ``tts.batching`` off (each session advances its own synthesis
on a thread of its own) and then on (the TTS batcher, schedulers/tts_batch.py), the
order alternating per level. Only the TTS stage runs (no ASR, no LLM).

Per level and mode:

- ``first_audio_ms``: text handed to the stage → its first audio out (p50/p95/max
  over sessions): the silence a user hears before the reply starts;
- ``stall_ms``: each session's audio played in real time from its first sample:
  the total time its playback would wait for audio not there yet (p50/p95/max over
  sessions, and the sum);
- ``cpu_s`` (process CPU time) and ``wall_s``;
- ``identical``: every session's audio has the same length in both modes (the same
  codes: the LM's steps may be batched, its decisions are the session's own).

``vocoder_batch``: why the vocoder's pushes are ordered, not batched: HiFi-GAN over a
push's mel for 1, 2 and 4 utterances at once, ms per utterance.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from voicepipe.bench._progress import progress


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tts-batch",
        help="TTS of N sessions speaking at once, batched vs each alone (JSON)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--sessions", type=int, default=8, help="highest level (1, 2, 4, … up to N)")
    p.add_argument("--chunks", type=int, default=3, help="chunks of each reply spoken")
    p.add_argument("--stagger-ms", type=float, default=250.0, help="between session starts")
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.set_defaults(func=run)


def stalls(arrivals: list[tuple[float, float]]) -> float:
    """Seconds a real-time playout starting at the first arrival waits for audio:
    ``arrivals`` are (time it arrived, seconds of audio), in order."""
    waited, end = 0.0, None
    for t, dur in arrivals:
        if end is None:
            end = t
        elif t > end:
            waited += t - end
            end = t
        end += dur
    return waited


async def _level(cfg: Any, replies: list[list[str]], stagger_s: float) -> dict[str, Any]:
    import asyncio

    from voicepipe.frames import Frame, InputEnd, ReplyAudio, TextChunk
    from voicepipe.pipeline import Pipeline
    from voicepipe.stages.tts import CodecLMBackend, TTSStage

    n = len(replies)
    got: list[dict[str, Any]] = [
        {"t0": 0.0, "audio": [], "done": asyncio.Event()} for _ in range(n)
    ]
    pipes = []
    for g in got:

        async def sink(f: Frame, g: dict[str, Any] = g) -> None:
            if isinstance(f, ReplyAudio):
                g["audio"].append((time.perf_counter(), len(f.pcm) / f.sample_rate))
            elif isinstance(f, InputEnd):
                g["done"].set()

        pipes.append(Pipeline([TTSStage(cfg, CodecLMBackend(cfg))], sink))
    for p in pipes:
        await p.start()
    cpu0, t0 = time.process_time(), time.perf_counter()

    async def speak(i: int) -> None:
        await asyncio.sleep(i * stagger_s)
        got[i]["t0"] = time.perf_counter()
        chunks = replies[i]
        for j, c in enumerate(chunks):
            await pipes[i].put(TextChunk(turn_id=1, text=c, last=j == len(chunks) - 1))
        await pipes[i].put(InputEnd(turn_id=1))
        await got[i]["done"].wait()

    await asyncio.gather(*(speak(i) for i in range(n)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    for p in pipes:
        await p.stop()
    return {"wall_s": wall, "cpu_s": cpu, "sessions": got}


def _summary(lv: dict[str, Any]) -> dict[str, Any]:
    from voicepipe.bench.common import pcts

    first = [(g["audio"][0][0] - g["t0"]) * 1000 for g in lv["sessions"] if g["audio"]]
    stall = [stalls(g["audio"]) * 1000 for g in lv["sessions"]]
    return {
        "first_audio_ms": pcts(first),
        "stall_ms": {**pcts(stall), "sum": round(sum(stall), 1)},
        "audio_s": round(sum(d for g in lv["sessions"] for _, d in g["audio"]), 2),
        "cpu_s": round(lv["cpu_s"], 2),
        "wall_s": round(lv["wall_s"], 2),
    }


def _lengths(lv: dict[str, Any]) -> list[float]:
    return [round(sum(d for _, d in g["audio"]), 4) for g in lv["sessions"]]


async def bench(cfg: Any, max_n: int, chunks: int, stagger_s: float, log: Any) -> dict[str, Any]:
    import dataclasses

    from voicepipe.bench.e2e_levels import parse_levels
    from voicepipe.bench.tts_replies import load_replies
    from voicepipe.schedulers.tts_batch import tts_batcher_for
    from voicepipe.stages.tts import CodecLMBackend

    if cfg.tts.backend != "codec-lm":
        raise SystemExit("bench tts-batch measures the codec-lm backend (tts.backend)")
    data = load_replies()
    replies = [r["chunks"][:chunks] for r in data["replies"] if len(r["chunks"]) >= 2]
    modes = {
        m: dataclasses.replace(cfg, tts=dataclasses.replace(cfg.tts, batching=m == "batched"))
        for m in ("alone", "batched")
    }
    CodecLMBackend(cfg).warm_up()  # the shared weights and vocoder widths, not counted
    rows = []
    for i, n in enumerate(parse_levels(max_n)):
        texts = [replies[(i * 7 + s) % len(replies)] for s in range(n)]
        order = ["alone", "batched"] if i % 2 == 0 else ["batched", "alone"]
        got = {m: await _level(modes[m], texts, stagger_s) for m in order}
        row: dict[str, Any] = {
            "sessions": n,
            "identical": _lengths(got["alone"]) == _lengths(got["batched"]),
        }
        row.update({m: _summary(got[m]) for m in ("alone", "batched")})
        rows.append(row)
        a, b = row["alone"], row["batched"]
        log(
            f"  n={n}: first audio p95 {a['first_audio_ms']['p95']} → "
            f"{b['first_audio_ms']['p95']} ms, stalls {a['stall_ms']['sum']} → "
            f"{b['stall_ms']['sum']} ms, cpu {a['cpu_s']} → {b['cpu_s']} s, "
            f"identical={row['identical']}"
        )
    backend = CodecLMBackend(cfg)
    b = tts_batcher_for(backend.tts, cfg.tts.batch_ahead_ms / 1000)
    return {
        "replies": data.get("model", ""),
        "chunks": chunks,
        "stagger_ms": stagger_s * 1000,
        "batch_ahead_ms": cfg.tts.batch_ahead_ms,
        "levels": rows,
        "batcher": {
            "lm_steps": b.lm_steps,
            "rows": b.rows,
            "max_batch": b.max_batch,
            "pushes": b.pushes,
        },
        "vocoder_batch": vocoder_batch(backend.tts.codec, cfg.codec.chunk_frames),
    }


def vocoder_batch(codec: Any, chunk_frames: int, repeats: int = 5) -> dict[str, Any]:
    """Would batching the vocoder pay? One push's mel (``chunk_frames`` codec frames and
    HiFi-GAN's streaming context) through the configured vocoder for B = 1, 2, 4
    utterances at once, one thread: ms per utterance (best of ``repeats``). Written
    for HiFi-GAN; the iSTFT vocoder's push costs a few ms either way."""
    import torch

    gen = codec.vocoder.model
    dtype = next(gen.parameters()).dtype
    width = chunk_frames * 4 + 26  # mel frames of a push and its left context
    out: dict[str, Any] = {"threads": 1, "mel_frames": width}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            for batch in (1, 2, 4):
                x = torch.randn(batch, 80, width, generator=torch.Generator().manual_seed(0))
                x = x.to(dtype)
                gen(x)  # (oneDNN builds its primitive for this shape)
                best = float("inf")
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    gen(x)
                    best = min(best, time.perf_counter() - t0)
                out[f"ms_per_utterance_b{batch}"] = round(1000 * best / batch, 1)
    finally:
        torch.set_num_threads(threads)
    return out


def run(args: argparse.Namespace) -> int:
    import asyncio

    log = progress(args)

    out = asyncio.run(
        bench(args.config, max(1, args.sessions), args.chunks, args.stagger_ms / 1000, log)
    )
    print(json.dumps(out, indent=None if args.json else 2))
    return 0 if all(r["identical"] for r in out["levels"]) else 1
