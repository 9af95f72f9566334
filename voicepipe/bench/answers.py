"""`voicepipe bench answers [--model A,B] [--json]`: are the LLM's spoken answers right?

Asks each model the question set ``voicepipe/bench/answers_set.toml`` (facts,
arithmetic, units, dates, translation, definitions, advice, refusals of what a
voice assistant cannot do, two-turn follow-ups) through the real LLM stage:
``voicepipe.stages.llm.stage.LlmStage`` with the configured system prompt, its
conversation memory across an item's turns, its engine (chat template,
speculative decoder, drafter) and its clause chunker. Each item gets a fresh
session (a new stage on a fork of the shared weights), as a new caller would;
the reply checked is what the stage hands to the TTS (the chunks, joined),
against the item's regexes (``voicepipe.bench.answer_checks``).

Prints one JSON object: per model, accuracy overall and per category, decode
speed (``decode_tok_s``: tokens after the first over the time from the first
token to the last, all replies pooled), the target's passes (``target_passes``,
``tokens_per_pass``: reply tokens per pass, a tool reply's call included; unlike
the times, the same on a busy machine), time to first token (the stage's
``llm.ttft`` span: prompt prefill, for first turns on a fresh session and for
follow-ups that prefill only the new turn), mean reply length in tokens and
words, replies cut off at ``llm.max_new_tokens``, and every item's reply and
verdict. Greedy decoding (``llm.temperature = 0``) gives the same replies with
or without a drafter, so the drafter moves speed only.

Drafter: ``--drafter`` for every model; by default the configured drafter for
the configured model and prompt lookup (``ngram``) for the others (the EAGLE
draft is trained for SmolLM2-135M only).

``--rescore RESULT.json`` runs no model: it judges the replies recorded in an
earlier run's JSON again by the set's current checks (after a check is fixed).

Tools (``[tools]``) are off in this run: the refusal items ask for what an
assistant without tools cannot do. ``--served`` asks the same items the way
``voicepipe serve`` answers them, tools as configured (on by default, with the
tools system prompt), leaving out the refusals the built-in tools do
(``tool_doable``: the time, a timer). ``--tools`` asks the set's tool items
instead (kind ``tool``: timers, the time, arithmetic) with tools on, and scores
per tool the share of requests whose first call (the ``llm.tool`` span's
attrs) is the right tool with the right arguments (``core.tools.judge_calls``);
``speech_with_call_text`` counts replies whose spoken text shows a call's JSON
or tags (it should be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

SET_PATH = Path(__file__).with_name("answers_set.toml")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "answers",
        help="accuracy of the LLM's spoken answers per model and category, with speed (JSON)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="", help="NAME[,NAME...] (default: llm.model)")
    p.add_argument("--drafter", default="", help="drafter for every model (see above)")
    p.add_argument("--set", default=str(SET_PATH), help="question set (TOML or JSON)")
    p.add_argument("--category", default="", help="CAT[,CAT...]: only these categories")
    p.add_argument("--n", type=int, default=0, help="only the first N items (after --category)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--no-items", action="store_true", help="leave per-item replies out")
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.add_argument(
        "--tools", action="store_true", help="ask the tool items with tools on: per-tool scores"
    )
    p.add_argument(
        "--served",
        action="store_true",
        help="the plain items with tools as configured (as `voicepipe serve` answers), "
        "without the refusals the built-in tools do",
    )
    p.add_argument(
        "--rescore",
        default="",
        metavar="RESULT.json",
        help="no model: score the replies recorded in an earlier run against the set's checks",
    )
    p.set_defaults(func=run)


def load_set(path: str | Path):
    from voicepipe.bench.answer_checks import parse_set
    from voicepipe.config import tomllib

    p = Path(path)
    text = p.read_text(encoding="utf-8")
    return parse_set(json.loads(text) if p.suffix == ".json" else tomllib.loads(text))


def _mean(xs: list[float]) -> float:
    return round(statistics.fmean(xs), 1) if xs else 0.0


async def _ask(stage, turn: int, text: str) -> dict[str, Any]:
    """One turn through the stage; its reply and the stage's own spans."""
    from voicepipe.frames import MetricsFrame, SpanFrame

    spans: dict[str, SpanFrame] = {}
    calls: list[dict[str, Any]] = []  # every llm.tool span's calls, in order
    tool_ms: list[float] = []
    spec: dict[str, Any] = {}

    async def sink(f) -> None:
        if isinstance(f, MetricsFrame) and f.source == "llm":
            spec.update(f.values)
        if isinstance(f, SpanFrame):
            spans[f.name] = f
            if f.name == "llm.tool":
                calls.extend(f.attrs.get("calls", []))
                tool_ms.append(round(f.duration_ms, 1))

    stage.push = sink
    reply = await stage.reply(turn, text)
    ttft = spans.get("llm.ttft")
    tpot = spans.get("llm.tpot")
    tokens = int(tpot.attrs["tokens"]) if tpot else (1 if ttft else 0)
    return {
        "reply": reply,
        "ttft_ms": round(ttft.duration_ms, 1) if ttft else None,
        "tokens": tokens,
        "decode_ms": float(tpot.attrs["decode_ms"]) if tpot else 0.0,
        # the whole prompt: system prompt, earlier turns (the stage's memory) and this one
        "prompt_tokens": int(ttft.attrs["prompt_tokens"]) if ttft else 0,
        "calls": calls,
        "tool_ms": tool_ms,  # each tool round: writing the call, running it, its results in
        # the target's passes for the whole reply (a tool round's call included): unlike
        # the times, the same on a busy machine
        "target_passes": int(spec.get("target_passes", 0)),
    }


async def run_model(cfg, items: list, log=None) -> dict[str, Any]:
    """Ask every item of ``items`` through a real LlmStage built from ``cfg``."""
    from voicepipe.bench.answer_checks import Tally
    from voicepipe.core.tools import judge_calls
    from voicepipe.stages.llm.engine import engine_for
    from voicepipe.stages.llm.stage import LlmStage

    t0 = time.perf_counter()
    base = await asyncio.to_thread(engine_for, cfg)
    load_s = time.perf_counter() - t0
    tally = Tally()
    rows: list[dict[str, Any]] = []
    first_ttft: list[float] = []
    follow_ttft: list[float] = []
    tokens: list[int] = []
    words: list[int] = []
    dec_tokens = 0
    dec_ms = 0.0
    passes = 0
    cut = 0
    leaked = 0
    t_all = time.perf_counter()
    for item in items:
        stage = LlmStage(cfg, base.fork())  # a new session: own conversation and KV cache
        if item.kind == "tool" and stage.tools is None:
            raise ValueError(f"{cfg.llm.model}: its chat template does not render tools")
        turns = []
        for n, text in enumerate(item.turns, 1):
            r = await _ask(stage, n, text)
            turns.append(r)
            if r["ttft_ms"] is not None:
                (first_ttft if n == 1 else follow_ttft).append(r["ttft_ms"])
            tokens.append(r["tokens"])
            passes += r["target_passes"]
            words.append(len(r["reply"].split()))
            cut += r["tokens"] >= cfg.llm.max_new_tokens
            if r["tokens"] > 1:
                dec_tokens += r["tokens"] - 1
                dec_ms += r["decode_ms"]
        await stage.stop()  # a session's timers end with it
        if item.kind == "tool":
            ok, why = judge_calls(item.raw, turns[-1]["calls"])
            tally.add(str(item.raw.get("tool")), ok)  # scored per tool
            leaked += any(_shows_call(t["reply"]) for t in turns)
        else:
            ok, why = item.check.verdict(turns[-1]["reply"])
            tally.add(item.category, ok)
        rows.append(
            {
                "id": item.id,
                "category": item.category,
                "pass": ok,
                "why": why,
                "turns": list(item.turns),
                "replies": [t["reply"] for t in turns],
                "tokens": [t["tokens"] for t in turns],
                "prompt_tokens": [t["prompt_tokens"] for t in turns],
                "target_passes": [t["target_passes"] for t in turns],
                # (a plain item's calls too, where it made any: tools as served)
                **(
                    {"calls": turns[-1]["calls"], "tool_ms": turns[-1]["tool_ms"]}
                    if item.kind == "tool" or turns[-1]["calls"]
                    else {}
                ),
            }
        )
        if log:
            log(f"{cfg.llm.model} {'pass' if ok else 'FAIL'} {item.id}: {turns[-1]['reply']!r}")
    all_ttft = first_ttft + follow_ttft
    out: dict[str, Any] = {
        "model": cfg.llm.model,
        "drafter": cfg.llm.drafter,
        "weights": cfg.llm.weights,
        "params_m": round(base.model.n_params / 1e6, 1),
        "load_s": round(load_s, 2),
        **tally.as_dict(),
        "decode_tok_s": round(dec_tokens / (dec_ms / 1e3), 1) if dec_ms else 0.0,
        "ttft_ms_first_turn": _mean(first_ttft),
        "ttft_ms_followup": _mean(follow_ttft),
        "ttft_ms_median": round(statistics.median(all_ttft), 1) if all_ttft else 0.0,
        "mean_reply_tokens": _mean([float(t) for t in tokens]),
        "target_passes": passes,
        "tokens_per_pass": round(sum(tokens) / passes, 3) if passes else 0.0,
        "mean_reply_words": _mean([float(w) for w in words]),
        "replies": len(tokens),
        "replies_cut_at_max_new_tokens": cut,
        "wall_s": round(time.perf_counter() - t_all, 1),
        "items": rows,
    }
    if any(i.kind == "tool" for i in items):
        out["by_tool"] = out.pop("by_category")
        out["speech_with_call_text"] = leaked
    return out


def _shows_call(reply: str) -> bool:
    """A spoken reply that carries a call's tags or JSON (the splitter should stop it)."""
    return "tool_call" in reply or '"name"' in reply or "{" in reply


def rescore(result: dict[str, Any], qset) -> dict[str, Any]:
    """An earlier run's JSON with every recorded reply judged again by ``qset``'s checks
    (after a check was fixed: the replies do not depend on the checks)."""
    from voicepipe.bench.answer_checks import Tally
    from voicepipe.core.tools import judge_calls

    items = {i.id: i for i in qset.items}
    for row in result["models"]:
        if "items" not in row:
            raise ValueError(f"{row['model']}: the result has no replies (run without --no-items)")
        tally = Tally()
        for r in row["items"]:
            item = items.get(r["id"])
            if item is None:
                raise ValueError(f"item {r['id']!r} is no longer in the set")
            if list(item.turns) != r.get("turns", list(item.turns)):
                raise ValueError(f"item {r['id']!r} asks something else now: run it again")
            if item.kind == "tool":
                r["pass"], r["why"] = judge_calls(item.raw, r.get("calls", []))
                tally.add(str(item.raw.get("tool")), r["pass"])
            else:
                r["pass"], r["why"] = item.check.verdict(r["replies"][-1])
                tally.add(item.category, r["pass"])
        row.update(tally.as_dict())
        if "by_tool" in row:
            row["by_tool"] = row.pop("by_category")
    result["rescored"] = True
    return result


def model_config(cfg, model: str, drafter: str):
    """``cfg`` with ``model``; the drafter: ``drafter``, else the configured one for the
    configured model, else prompt lookup (an EAGLE draft belongs to its own target)."""
    d = drafter or (cfg.llm.drafter if model == cfg.llm.model else "ngram")
    return dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, model=model, drafter=d))


def run(args: argparse.Namespace) -> int:
    import torch

    from voicepipe import registry
    from voicepipe.bench.answer_checks import REPLY, SetError
    from voicepipe.bench.common import cpu

    torch.set_num_threads(args.threads)
    cfg = args.config
    # Tools on only for the tool items (the plain set's refusals assume none), or as
    # configured with --served.
    tools_on = args.tools or (args.served and cfg.tools.enabled)
    cfg = dataclasses.replace(cfg, tools=dataclasses.replace(cfg.tools, enabled=tools_on))
    try:
        qset = load_set(args.set)
        cats = [c for c in args.category.split(",") if c] or None
        items = qset.select(kinds=("tool",) if args.tools else (REPLY,), categories=cats)
        if args.served:
            items = [i for i in items if not i.raw.get("tool_doable")]
    except (OSError, SetError, ValueError) as e:
        print(f"voicepipe bench answers: {e}", file=sys.stderr)
        return 2
    if args.n:
        items = items[: args.n]
    if args.rescore:
        try:
            judged = rescore(json.loads(Path(args.rescore).read_text()), qset)
        except (OSError, ValueError, KeyError) as e:
            print(f"voicepipe bench answers: --rescore: {e}", file=sys.stderr)
            return 2
        print(json.dumps(judged, indent=None if args.json else 2))
        return 0
    models = [m for m in args.model.split(",") if m] or [cfg.llm.model]
    log = None if args.json else (lambda s: print(s, file=sys.stderr, flush=True))
    out: dict[str, Any] = {
        "machine": {"cpu": cpu(), "threads": args.threads, "loadavg_start": os.getloadavg()[0]},
        "set": {
            "path": str(args.set),
            "version": qset.version,
            "items": len(items),
            "turns": sum(len(i.turns) for i in items),
            "categories": sorted({i.category for i in items}),
        },
        "llm": {
            "system_prompt": cfg.tools.system_prompt if tools_on else cfg.llm.system_prompt,
            "tools": tools_on,
            "served": args.served,
            "max_new_tokens": cfg.llm.max_new_tokens,
            "temperature": cfg.llm.temperature,
        },
        "models": [],
    }
    for name in models:
        mcfg = model_config(cfg, name, args.drafter)
        try:
            row = asyncio.run(run_model(mcfg, items, log))
        except (registry.ModelError, FileNotFoundError, ValueError) as e:
            print(f"voicepipe bench answers: {name}: {e}", file=sys.stderr)
            return 2
        if args.no_items:
            del row["items"]
        out["models"].append(row)
        summary = {k: v for k, v in row.items() if k != "items"}
        print(json.dumps(summary), file=sys.stderr, flush=True)
    out["machine"]["loadavg_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=None if args.json else 2))
    return 0
