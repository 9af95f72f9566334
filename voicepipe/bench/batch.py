"""`voicepipe bench batch`: LLM replies of many sessions at once, batched or each alone.

N sessions (1, 2, 4, … up to ``--sessions``) each ask one question of the LLM
stage at the same moment, in one process over one model, first with
``llm.batching`` off (each session's own model passes, on the default executor's
threads) and then on (one batch scheduler: voicepipe/stages/llm_batch.py), the
order alternating per level so that neither always runs second. Only the LLM
runs (no ASR, no TTS): this isolates what batching does to decoding.

Per level and mode: ``tok_s`` (aggregate reply tokens per second of wall time,
first request to last token), TTFT and TPOT p50/p95/p99 (ms, over sessions:
``llm.ttft`` and ``llm.tpot`` as the stage measures them), and whether every
batched reply was token-identical to the same session's reply without batching
(greedy). ``speedup`` compares each level's aggregate tok_s with one session's
(same mode) and with the unbatched level's.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from voicepipe.bench._progress import progress

QUESTIONS = [
    "What are three simple ways to sleep better?",
    "Explain what a rainbow is to a seven-year-old.",
    "How do I boil an egg so the yolk stays soft?",
    "Give me a short tip for staying focused while working from home.",
    "Why do cats purr?",
    "What is a good name for a small orange dog?",
    "How far away is the moon?",
    "What should I pack for a weekend hiking trip?",
    "Tell me a fun fact about octopuses.",
    "How do plants make their food?",
    "What is the difference between weather and climate?",
    "Suggest a quick vegetarian dinner.",
]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "batch",
        help="LLM replies of N sessions at once, batched vs each alone (JSON)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--sessions", type=int, default=8, help="highest level (1, 2, 4, … up to N)")
    p.add_argument("--tokens", type=int, default=0, help="max new tokens (default: the config's)")
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.set_defaults(func=run)


async def _level(cfg: Any, engine: Any, n: int) -> dict[str, Any]:
    import asyncio
    import time

    from voicepipe.frames import Frame, SpanFrame, TextDelta
    from voicepipe.stages.llm import LlmStage

    stages = [LlmStage(cfg, engine.fork()) for _ in range(n)]
    outs: list[dict[str, Any]] = [{"text": "", "spans": {}} for _ in range(n)]
    for st, out in zip(stages, outs, strict=True):
        await st.start()

        async def sink(f: Frame, out: dict[str, Any] = out) -> None:
            if isinstance(f, TextDelta):
                out["text"] += f.text
            elif isinstance(f, SpanFrame):
                out["spans"][f.name] = f

        st.push = sink  # type: ignore[method-assign]
    t0 = time.perf_counter()
    await asyncio.gather(
        *(st.reply(1, QUESTIONS[i % len(QUESTIONS)]) for i, st in enumerate(stages))
    )
    wall = time.perf_counter() - t0
    tokens = sum(
        int(o["spans"]["llm.tpot"].attrs["tokens"]) for o in outs if "llm.tpot" in o["spans"]
    )  # noqa: E501
    return {"wall_s": wall, "tokens": tokens, "outs": outs}


def _summary(lv: dict[str, Any]) -> dict[str, Any]:
    from voicepipe.bench.e2e import _pcts

    def ms(name: str) -> list[float]:
        return [o["spans"][name].duration_ms for o in lv["outs"] if name in o["spans"]]

    return {
        "tok_s": round(lv["tokens"] / lv["wall_s"], 1),
        "tokens": lv["tokens"],
        "wall_s": round(lv["wall_s"], 3),
        "ttft_ms": _pcts(ms("llm.ttft")),
        "tpot_ms": _pcts(ms("llm.tpot")),
    }


async def bench(cfg: Any, max_n: int, log: Any) -> dict[str, Any]:
    import dataclasses

    from voicepipe.bench.e2e import _levels
    from voicepipe.stages.llm import engine_for
    from voicepipe.stages.llm_batch import batcher_for

    modes = {
        m: dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, batching=m == "batched"))
        for m in ("alone", "batched")
    }
    engine = engine_for(cfg)
    await _level(modes["alone"], engine, 1)  # warm-up (kernels, caches), not counted
    rows = []
    for i, n in enumerate(_levels(max_n)):
        order = ["alone", "batched"] if i % 2 == 0 else ["batched", "alone"]
        got = {m: await _level(modes[m], engine, n) for m in order}
        same = all(
            a["text"] == b["text"]
            for a, b in zip(got["alone"]["outs"], got["batched"]["outs"], strict=True)
        )
        row: dict[str, Any] = {"sessions": n, "identical": same}
        row.update({m: _summary(got[m]) for m in ("alone", "batched")})
        rows.append(row)
        log(f"  n={n}: alone {row['alone']['tok_s']} tok/s, batched {row['batched']['tok_s']} "
            f"tok/s, identical={same}")  # fmt: skip
    for row in rows:
        for m in ("alone", "batched"):
            row[m]["vs_one_session"] = round(row[m]["tok_s"] / rows[0][m]["tok_s"], 2)
        row["batched_vs_alone"] = round(row["batched"]["tok_s"] / row["alone"]["tok_s"], 2)
    b = batcher_for(engine)
    return {
        "model": cfg.llm.model,
        "drafter": cfg.llm.drafter,
        "max_new_tokens": cfg.llm.max_new_tokens,
        "levels": rows,
        "batcher": {
            "passes": b.steps,
            "rows": b.rows,
            "max_batch": b.max_batch,
            "passes_by_k_cap": b.k_caps,
        },
    }


def run(args: argparse.Namespace) -> int:
    import asyncio
    import dataclasses

    cfg = args.config
    if args.tokens:
        cfg = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, max_new_tokens=args.tokens))

    log = progress(args)

    out = asyncio.run(bench(cfg, max(1, args.sessions), log))
    print(json.dumps(out, indent=None if args.json else 2))
    return 0 if all(r["identical"] for r in out["levels"]) else 1
