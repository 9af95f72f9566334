"""`voicepipe bench startup [--models A,B] [--json]`: LLM load time and per-turn prefill.

Prints one JSON object:

  load:    one row per model: first_load_s (a fresh process with no packed-weights
           file: GGUF parse, dequantize, pack, write the cache file), cached_load_s
           (the best of --repeats fresh processes mapping that file), both as
           ``llama.load`` reports them, plus the whole child process's wall time
           (python and torch start-up included) and the cache file's size. The C++
           kernels are built before timing (once per machine, not per start).
  turns:   one row per model and prefix-cache setting: two sessions (LlmStage, real
           engine, greedy) of three turns each; per turn the llm.ttft span's
           prompt_tokens, prefilled (run through the model), shared (copied from the
           process-wide prefix cache), reused (kept in the session's cache),
           prefill_chunks and ttft_ms.
  stall:   (--stall) session A decodes a reply while session B's ~500-token prompt
           is prefilled, B's prefill in one pass (prefill_chunk 0) or in 32-token
           passes, alternating twice: A's steps during B's prefill, A's longest
           gap between steps across it, A's median gap before it, B's ttft.

--cold-only / --no-turns skip parts. The first load rewrites the model's cache file.

--fresh-clone: instead, a fresh clone of this repository's HEAD to a serving `make run`
with cold caches, timed per step (voicepipe/bench/startup_fresh.py).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time

QUESTIONS = (
    "What is the capital of France?",
    "And how many people live there?",
    "Name one famous museum in it.",
)


def _child(model: str, weights: str) -> None:
    """One load in this fresh process; prints its JSON row."""
    from voicepipe.nn.llm import llama
    from voicepipe.nn.llm.engine import gguf_path

    m, load_s = llama.load(gguf_path(model), weights, max_len=2048)
    print(json.dumps({"load_s": round(load_s, 2), "kernel": m.kernel}))


def _spawn(model: str, weights: str) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "voicepipe.bench.startup", "--child", model, weights],
        capture_output=True, text=True, check=True, env={**os.environ},
    )  # fmt: skip
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["process_s"] = round(time.perf_counter() - t0, 2)
    return row


def load_row(model: str, weights: str, repeats: int, cold: bool) -> dict:
    from voicepipe.nn import kernels
    from voicepipe.nn.llm import packed
    from voicepipe.nn.llm.engine import gguf_path

    kernels.llama_step()  # built once per machine: not part of any start-up below
    path = packed.cache_path(gguf_path(model), weights, True)
    row: dict = {"model": model, "weights": weights}
    if cold:
        path.unlink(missing_ok=True)
        first = _spawn(model, weights)
        row.update(first_load_s=first["load_s"], first_process_s=first["process_s"])
    runs = [_spawn(model, weights) for _ in range(repeats)]
    best = min(runs, key=lambda r: r["load_s"])
    row.update(
        cached_load_s=best["load_s"],
        cached_process_s=best["process_s"],
        cached_runs_s=[r["load_s"] for r in runs],
        kernel=best["kernel"],
        cache_file_mb=round(path.stat().st_size / 1e6, 1) if path.exists() else None,
    )
    return row


async def _session(cfg, engine=None) -> list[dict]:
    from voicepipe.frames import SpanFrame
    from voicepipe.stages.llm.stage import LlmStage

    stage = LlmStage(cfg, engine)
    spans: list[SpanFrame] = []

    async def sink(f) -> None:
        if isinstance(f, SpanFrame) and f.name == "llm.ttft":
            spans.append(f)

    stage.push = sink  # type: ignore[method-assign]
    await stage.start()
    rows = []
    for turn, q in enumerate(QUESTIONS, 1):
        await stage.reply(turn, q)
        a = spans[-1].attrs
        rows.append(
            {k: a[k] for k in ("prompt_tokens", "prefilled", "shared", "reused", "prefill_chunks")}
            | {"ttft_ms": round(spans[-1].duration_ms, 1)}
        )
    return rows


def turns_rows(model: str, drafter: str, max_new: int) -> list[dict]:
    from voicepipe.config import Config
    from voicepipe.stages.llm.engine import engine_for

    out = []
    for share in (False, True):
        c = Config()
        llm = dataclasses.replace(
            c.llm, model=model, drafter=drafter, max_new_tokens=max_new, prefix_cache=share
        )
        cfg = dataclasses.replace(c, llm=llm)
        # engine_for loads the model (not timed here) and, with the prefix cache, the
        # first one computes the system prompt's keys and values (as the server's
        # preload does); the second session copies them.
        sessions = [asyncio.run(_session(cfg, engine_for(cfg))) for _ in range(2)]
        out.append({"model": model, "drafter": drafter, "prefix_cache": share,
                    "sessions": sessions})  # fmt: skip
    return out


LONG = "Here are my notes from this week; read them and tell me what matters most. " + " ".join(
    f"On day {i} the team met at {8 + i % 4} o'clock, reviewed the open tickets, fixed "
    f"{i + 2} bugs in the billing service and agreed to ship the release on Friday."
    for i in range(1, 19)
)


async def _stall(model: str, drafter: str, chunk: int) -> dict:
    """Session A speaks (decodes) while session B's long prompt is prefilled: A's gaps
    between steps during B's prefill, with B's prefill in ``chunk``-token passes (0: one)."""
    from voicepipe.config import Config
    from voicepipe.frames import SpanFrame, TextDelta
    from voicepipe.stages.llm.engine import engine_for
    from voicepipe.stages.llm.stage import LlmStage

    c = Config()
    llm = dataclasses.replace(c.llm, model=model, drafter=drafter, prefill_chunk=chunk)
    cfg_a = dataclasses.replace(c, llm=dataclasses.replace(llm, max_new_tokens=160))
    cfg_b = dataclasses.replace(c, llm=dataclasses.replace(llm, max_new_tokens=1))
    a, b = LlmStage(cfg_a, engine_for(cfg_a)), LlmStage(cfg_b, engine_for(cfg_b))
    steps: list[float] = []
    ttft: list[SpanFrame] = []

    going = asyncio.Event()  # A has spoken a few steps

    async def sink_a(f) -> None:
        if isinstance(f, TextDelta):
            steps.append(time.perf_counter())
            if len(steps) >= 8:
                going.set()

    async def sink_b(f) -> None:
        if isinstance(f, SpanFrame) and f.name == "llm.ttft":
            ttft.append(f)

    a.push, b.push = sink_a, sink_b  # type: ignore[method-assign]
    await a.start()
    await b.start()
    speaking = asyncio.create_task(a.reply(1, "Tell me a long story about a brave little dragon."))
    await asyncio.wait({speaking, asyncio.create_task(going.wait())}, return_when="FIRST_COMPLETED")
    t0 = time.perf_counter()
    await b.reply(1, LONG)
    t1 = time.perf_counter()
    await speaking
    inside = [t for t in steps if t0 <= t <= t1]
    before = [t for t in steps if t < t0]
    # Every interval between A's consecutive steps that overlaps B's prefill.
    around = before[-1:] + inside + [t for t in steps if t > t1][:1]
    gaps = [y - x for x, y in zip(around, around[1:], strict=False)]
    normal = [y - x for x, y in zip(before, before[1:], strict=False)]
    attrs = ttft[0].attrs
    return {
        "prefill_chunk": chunk,
        "b_prompt_tokens": attrs["prompt_tokens"],
        "b_prefilled": attrs["prefilled"],
        "b_prefill_chunks": attrs["prefill_chunks"],
        "b_ttft_ms": round(ttft[0].duration_ms, 1),
        "a_steps_during": len(inside),
        "a_max_gap_ms": round(max(gaps) * 1e3, 1) if gaps else None,
        "a_gap_before_ms": round(sorted(normal)[len(normal) // 2] * 1e3, 1) if normal else None,
    }


def stall_rows(model: str, drafter: str) -> list[dict]:
    return [asyncio.run(_stall(model, drafter, ch)) for ch in (0, 32, 0, 32)]


def run(args: argparse.Namespace) -> int:
    if args.fresh_clone:
        from voicepipe.bench.startup_fresh import fresh_clone_run

        fresh = fresh_clone_run(args.timeout, args.keep, args.lines)
        print(json.dumps(fresh, indent=None if args.json else 2))
        return 0 if fresh["serving_s"] is not None else 1
    import torch

    torch.set_num_threads(args.threads)
    models = [m for m in args.models.split(",") if m]
    report: dict = {"threads": args.threads, "load": [], "turns": [], "stall": []}
    for m in models if not args.no_load else ():
        report["load"].append(load_row(m, args.weights, args.repeats, not args.no_cold))
        print(json.dumps(report["load"][-1]), file=sys.stderr, flush=True)
    for m in models:
        drafter = "ngram+smollm2-draft" if m == "smollm2-135m" else "ngram"
        if not args.no_turns:
            report["turns"] += turns_rows(m, drafter, args.max_new)
        if args.stall:
            report["stall"] += [{"model": m} | r for r in stall_rows(m, drafter)]
    print(json.dumps(report, indent=None if args.json else 2))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "startup",
        help="LLM load time (first vs packed-cache) and per-turn prefilled tokens (JSON)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--models", default="smollm2-135m,qwen2.5-coder-1.5b",
                   help="comma-separated (default smollm2-135m,qwen2.5-coder-1.5b)")  # fmt: skip
    p.add_argument("--weights", default="int4", help="weight format (default int4)")
    p.add_argument("--repeats", type=int, default=3, help="cached loads per model (best kept)")
    p.add_argument("--no-cold", action="store_true", help="keep the cache file: no first load")
    p.add_argument("--no-turns", action="store_true", help="no per-turn rows")
    p.add_argument("--no-load", action="store_true", help="no load rows")
    p.add_argument(
        "--stall",
        action="store_true",
        help="also: one session's decode gaps while another's long prompt prefills",
    )
    p.add_argument("--max-new", type=int, default=40, help="reply cap per turn (default 40)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument(
        "--fresh-clone", action="store_true",
        help="time a fresh clone's `make run` to serving, cold caches (needs the package index)",
    )  # fmt: skip
    p.add_argument("--timeout", type=float, default=1200.0,
                   help="with --fresh-clone: give up after this many seconds")  # fmt: skip
    p.add_argument("--keep", action="store_true", help="with --fresh-clone: keep the folder")
    p.add_argument("--lines", action="store_true", help="with --fresh-clone: every output line")
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.set_defaults(func=run)


if __name__ == "__main__":  # the child process of _spawn: --child MODEL WEIGHTS
    _child(sys.argv[2], sys.argv[3])
