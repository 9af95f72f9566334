"""`voicepipe bench batch`: LLM replies of many sessions at once, batched or each alone.

Every level answers the same ``--questions`` questions (``questions()``: the
list below, then the open questions of ``bench draft``; cycled past their
end), so levels differ only in how many are in flight: at level N
(1, 2, 4, … up to ``--sessions``) N sessions start together and take the
questions in order from one queue, each asking its next as soon as its reply
ends (a closed loop of N users), every question in a new conversation (the
system prompt comes from the prefix cache). The batch scheduler sees sessions
join and leave between steps, and the sessions run out of questions within one
reply of each other, so the drain at the end weighs as little as it can.

One process, one model; each level runs with ``llm.batching`` off (each
session's own model passes, on the default executor's threads) and on (one
batch scheduler: voicepipe/schedulers/llm_batch.py), the order alternating per
level so that neither always runs second. Only the LLM runs (no ASR, no TTS):
this isolates what batching does to decoding.

Per level and mode: ``tok_s`` (reply tokens per second of wall time, first
request to last token: prefill included), TTFT and TPOT p50/p95/p99 (ms, over
replies: ``llm.ttft`` and ``llm.tpot`` as the stage measures them), and whether
every batched reply was token-identical to the same question's reply without
batching (greedy). ``vs_one_session`` compares a level's tok_s with level 1's
(same mode: the same questions asked one at a time), ``batched_vs_alone`` the
two modes of a level. Then ``decode_passes`` (voicepipe/bench/batch_passes.py): the
model's batched one-token pass at each level alone, the aggregate decode rate of N
sessions that all have a reply in flight.
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


def questions() -> list[str]:
    """The questions a level asks, in order: ``QUESTIONS``, then ``bench draft``'s open
    questions not among them (written apart from every training prompt list)."""
    from voicepipe.training.draft_prompts import OPEN_PROMPTS

    return [*QUESTIONS, *(q for q in OPEN_PROMPTS if q not in QUESTIONS)]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "batch",
        help="LLM replies of N sessions at once, batched vs each alone (JSON)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--sessions", type=int, default=8, help="highest level (1, 2, 4, … up to N)")
    p.add_argument(
        "--questions",
        type=int,
        default=40,
        help="questions per level, shared among its sessions (default 40: each once)",
    )
    p.add_argument("--tokens", type=int, default=0, help="max new tokens (default: the config's)")
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.set_defaults(func=run)


async def _ask(cfg: Any, engine: Any, question: str) -> dict[str, Any]:
    """One question in a new conversation: its reply text and spans."""
    from voicepipe.frames import Frame, SpanFrame, TextDelta
    from voicepipe.stages.llm.stage import LlmStage

    st = LlmStage(cfg, engine.fork())
    out: dict[str, Any] = {"question": question, "text": "", "spans": {}}

    async def sink(f: Frame) -> None:
        if isinstance(f, TextDelta):
            out["text"] += f.text
        elif isinstance(f, SpanFrame):
            out["spans"][f.name] = f

    st.push = sink  # type: ignore[method-assign]
    await st.start()
    try:
        await st.reply(1, question)
    finally:
        await st.stop()
    return out


async def _level(cfg: Any, engine: Any, n: int, n_questions: int) -> dict[str, Any]:
    import asyncio
    import time

    outs: list[dict[str, Any]] = [{} for _ in range(n_questions)]
    qs = questions()
    queue = list(range(n_questions))  # one event loop: a plain list is a safe queue

    async def session() -> None:
        while queue:
            q = queue.pop(0)
            outs[q] = await _ask(cfg, engine, qs[q % len(qs)])

    t0 = time.perf_counter()
    await asyncio.gather(*(session() for _ in range(min(n, n_questions))))
    wall = time.perf_counter() - t0
    tokens = sum(
        int(o["spans"]["llm.tpot"].attrs["tokens"]) for o in outs if "llm.tpot" in o["spans"]
    )
    return {"wall_s": wall, "tokens": tokens, "outs": outs}


def _summary(lv: dict[str, Any]) -> dict[str, Any]:
    from voicepipe.bench.common import pcts

    def ms(name: str) -> list[float]:
        return [o["spans"][name].duration_ms for o in lv["outs"] if name in o["spans"]]

    return {
        "tok_s": round(lv["tokens"] / lv["wall_s"], 1),
        "tokens": lv["tokens"],
        "wall_s": round(lv["wall_s"], 3),
        "ttft_ms": pcts(ms("llm.ttft")),
        "tpot_ms": pcts(ms("llm.tpot")),
    }


async def bench(cfg: Any, max_n: int, n_questions: int, log: Any) -> dict[str, Any]:
    import dataclasses

    from voicepipe.bench.batch_passes import decode_passes
    from voicepipe.bench.e2e_levels import parse_levels
    from voicepipe.schedulers.llm_batch import batcher_for
    from voicepipe.stages.llm.engine import engine_for

    modes = {
        m: dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, batching=m == "batched"))
        for m in ("alone", "batched")
    }
    engine = engine_for(cfg)
    await _level(modes["alone"], engine, 1, 1)  # warm-up (kernels, caches), not counted
    rows = []
    for i, n in enumerate(parse_levels(max_n)):
        order = ["alone", "batched"] if i % 2 == 0 else ["batched", "alone"]
        got = {m: await _level(modes[m], engine, n, n_questions) for m in order}
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
    log("  decode passes alone (no prompts, no drafts) …")
    passes = await decode_passes(modes["alone"], engine, parse_levels(max_n), questions())
    return {
        "model": cfg.llm.model,
        "drafter": cfg.llm.drafter,
        "max_new_tokens": cfg.llm.max_new_tokens,
        "questions": n_questions,
        "levels": rows,
        "decode_passes": passes,
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

    out = asyncio.run(bench(cfg, max(1, args.sessions), max(1, args.questions), log))
    print(json.dumps(out, indent=None if args.json else 2))
    return 0 if all(r["identical"] for r in out["levels"]) else 1
