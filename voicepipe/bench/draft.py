"""`voicepipe bench draft`: greedy speculative decoding of the default LLM with its draft.

Prompts: the held-out assistant-style prompts of ``training.draft_prompts``
(never trained on, but from the training prompts' templates), or with
``--prompts open`` its 46 hand-written ones from none of them, rendered with
the configured system prompt; or bench llm's grounded set. For every
prompt the same loaded target decodes greedily without a drafter (plain) and
with each drafter, in turn, in the same process, so load on the machine hits
all rows alike. Every drafted reply is checked token for token against the
plain one (``identical``).

Columns per drafter: ``speedup`` = plain decode time / drafter decode time
(both measured from the call to the last token, prefill included, summed over
prompts); ``speedup_decode``: the same over the decode phase only (first token to
last: the prompt's prefill is the same work with or without a drafter);
``tok_s``; acceptance counters of ``spec.metrics.SpecMetrics``
(acceptance by draft position, mean accepted length = tokens per verifying
pass, time in propose / score / verify; siblings verified and taken;
``accept_hist``: how many target passes accepted 0, 1, 2, … draft tokens, passes
without a draft counted in 0);
``vocab_coverage`` = share of the plain replies' tokens inside the draft's
reduced vocabulary; with ``--agreement``, ``agreement``: the draft's first guess
against the target's token along the plain replies, teacher-forced
(``bench.draft_agreement``; with ``--engine`` a GGUF draft model's greedy guess
likewise, what an EAGLE draft is held against); for a hybrid, ``ngram_steps`` /
``store_steps``: passes drafted by prompt lookup / the reply store.
``--siblings 0.05,off`` runs each EAGLE drafter once per runner-up threshold
(rows "<drafter> siblings=<value>"), to weigh the draft tree against the chain in
one run; ``--store on,off`` once with and once without the draft's reply store
(spec.replies).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any


def _run(dec, prompt: list[int], max_new: int, stop: set[int]):
    """(tokens, seconds from the call, seconds from the first token: the decode phase)."""
    t0 = time.perf_counter()
    t1 = None
    out: list[int] = []
    for toks in dec.generate(prompt, max_new, stop):
        out += toks
        t1 = t1 or time.perf_counter()  # the first token comes from prefill, same for all rows
    end = time.perf_counter()
    return out, end - t0, end - (t1 or end)


def run(args: argparse.Namespace) -> int:
    import torch

    from voicepipe.bench.common import cpu
    from voicepipe.nn.llm import engine as E
    from voicepipe.nn.llm.tokenizer import ChatTokenizer
    from voicepipe.speculative.drafter import HYBRID, DrafterSpec
    from voicepipe.speculative.hybrid import HybridProposer
    from voicepipe.speculative.loop import SpeculativeDecoder
    from voicepipe.speculative.metrics import SpecMetrics
    from voicepipe.speculative.ngram import NgramProposer
    from voicepipe.speculative.sampling import SamplingParams
    from voicepipe.training.draft_prompts import OPEN_PROMPTS, heldout_prompts

    cfg = args.config.llm
    if args.threads:
        torch.set_num_threads(args.threads)
    weights = args.weights or cfg.weights
    m, load_s = E.shared_model(E.gguf_path(cfg.model), weights, 2048)
    tok = ChatTokenizer(m.metadata)
    sp = SamplingParams()
    plain = SpeculativeDecoder(E.ModelTarget(m), None, sp)
    rows: dict[str, SpeculativeDecoder] = {}
    vocabs: dict[str, set[int]] = {}
    eagles: dict[str, str] = {}  # row -> its EAGLE draft's name or path (--agreement)
    models: dict[str, Any] = {}  # row -> its GGUF draft model (--agreement, --engine)
    alts = _siblings(args.siblings)
    stores = _stores(args.store)
    for name, alt, store in (
        (n, a, s) for n in (args.drafters or cfg.drafter).split(",") for a in alts for s in stores
    ):
        row = name if not args.siblings else f"{name} siblings={'off' if alt is None else alt}"
        row += f" store={'on' if store else 'off'}" if args.store else ""
        if args.engine:  # exactly what the LLM stage runs: load_engine's K settings
            eng = E.load_engine(
                cfg.model, weights, name, cfg.spec_k, cfg.adaptive_k, sp, 2048,
                reply_store=cfg.reply_store,
            )  # fmt: skip
            assert eng.model is m
            rows[row] = _with_store(_with_siblings(eng.fork().decoder(), alt), store)
            if eng.eagle is not None:
                vocabs[row] = set(eng.eagle.vocab)
                eagles[row] = name.removeprefix(HYBRID)
            elif eng.draft_model is not None:
                models[row] = eng.draft_model
            continue
        if name == "ngram":
            ft, prop = E.ModelTarget(m), NgramProposer()
        else:  # an EAGLE draft, or "ngram+<draft>", exactly as the engine builds them
            spec = DrafterSpec.parse(name, is_eagle=lambda _: True, tunings=E.TUNINGS)
            ft, prop = E._session(m, spec, sp, None, E.shared_eagle(spec.name, m))
            vocabs[row] = set(prop.draft.vocab if isinstance(prop, HybridProposer) else prop.vocab)
            eagles[row] = spec.name
        # Adaptive K as the engine runs an EAGLE drafter: never paused (verify_cost 1.0).
        vc = 1.5 if name == "ngram" else 1.0
        rows[row] = _with_siblings(
            SpeculativeDecoder(
                ft, prop, sp, k=args.k, adaptive=not args.fixed_k, k_max=args.k_max, verify_cost=vc
            ),
            alt,
        )
    for dec in (plain, *rows.values()):  # a decode pass on this many fused-kernel threads
        dec.target.decode_threads = args.decode_threads  # (run alone: it gets them)
    if args.prompts == "grounded":  # bench llm's input-grounded set (quote, summarise)
        from voicepipe.bench.llm import PROMPTS

        prompts = PROMPTS["grounded"][: args.n or None]
    elif args.prompts == "open":  # hand-written, from none of the training templates
        prompts = OPEN_PROMPTS[: args.n or None]
    else:
        prompts = heldout_prompts(args.n or 40)
    system = [{"role": "system", "content": cfg.system_prompt}] if cfg.system_prompt else []

    def msgs(q: str) -> list[dict]:
        return [*system, {"role": "user", "content": q}]

    stop = set(tok.stop_ids)
    max_new = args.max_new or cfg.max_new_tokens
    base_t, base_n, base_d = 0.0, 0, 0.0
    res = {n: {"t": 0.0, "d": 0.0, "n": 0, "identical": 0, "m": SpecMetrics()} for n in rows}
    examples = []
    refs: list[int] = []
    pairs: list[tuple[list[int], list[int]]] = []  # (prompt, plain reply) for --agreement
    for i, q in enumerate(prompts):
        ids = tok.chat_ids(msgs(q))
        ref, dt, dd = _run(plain, ids, max_new, stop)
        base_t += dt
        base_d += dd
        base_n += len(ref)
        refs += ref
        pairs.append((ids, ref))
        for name, dec in rows.items():
            out, dt2, dd2 = _run(dec, ids, max_new, stop)
            r = res[name]
            r["t"] += dt2
            r["d"] += dd2
            r["n"] += len(out)
            r["identical"] += int(out == ref)
            r["m"].merge(dec.metrics)
            if isinstance(dec.proposer, HybridProposer):
                r["ngram_steps"] = r.get("ngram_steps", 0) + dec.proposer.used_ngram
                r["store_steps"] = r.get("store_steps", 0) + dec.proposer.used_store
                dec.proposer.used_ngram = dec.proposer.used_store = 0
        if i < 3:
            examples.append({"prompt": q, "reply": tok.decode(ref)})
        if not args.json:
            print(f"[{i + 1}/{len(prompts)}] {q!r}: {len(ref)} tokens", file=sys.stderr)
    report = {
        "machine": {"cpu": cpu(), "cores": os.cpu_count()},  # as /proc/cpuinfo names it
        "prompt_set": args.prompts,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "model": cfg.model,
        "weights": weights,
        "threads": torch.get_num_threads(),
        "decode_threads": args.decode_threads,
        "k": cfg.spec_k if args.engine else args.k,
        "k_max": "engine" if args.engine else args.k_max,
        "adaptive_k": cfg.adaptive_k if args.engine else not args.fixed_k,
        "engine_settings": args.engine,
        "prompts": len(prompts),
        "max_new_tokens": max_new,
        "plain": {
            "tokens": base_n,
            "time_s": round(base_t, 2),
            "decode_s": round(base_d, 2),
            "tok_s": round(base_n / base_t, 2),
        },
        "drafters": {},
        "examples": examples,
    }
    for name, r in res.items():
        report["drafters"][name] = {
            "tokens": r["n"],
            "time_s": round(r["t"], 2),
            "tok_s": round(r["n"] / r["t"], 2),
            "speedup": round(base_t / r["t"], 3),
            "speedup_decode": round(base_d / r["d"], 3),
            "identical": f"{r['identical']}/{len(prompts)}",
            **r["m"].as_dict(),
        }
        if "ngram_steps" in r:  # hybrid: verifying steps whose drafts came from the n-gram
            report["drafters"][name]["ngram_steps"] = r["ngram_steps"]
            report["drafters"][name]["store_steps"] = r["store_steps"]  # ... the reply store
        if name in vocabs:  # share of the target's reply tokens the draft can propose at all
            cov = sum(t in vocabs[name] for t in refs) / max(1, len(refs))
            report["drafters"][name]["vocab_coverage"] = round(cov, 4)
    if args.agreement:
        _agreement(report, m, eagles, models, pairs)
    print(json.dumps(report, indent=None if args.json else 2))
    return 0 if all(r["identical"] == len(prompts) for r in res.values()) else 1


def _agreement(
    report: dict, m, eagles: dict[str, str], models: dict[str, Any], pairs: list
) -> None:
    """Each EAGLE drafter row's teacher-forced first-guess agreement (bench.draft_agreement)
    along the plain replies, computed once per draft; a draft model's row likewise, from
    its own greedy guess."""
    from voicepipe.bench.draft_agreement import agreement, model_agreement, samples
    from voicepipe.nn.llm.draft_spec import load_draft

    for row, dm in models.items():
        report["drafters"][row]["agreement"] = model_agreement(dm, pairs)
    if not eagles:
        return

    rows = samples(m, pairs)
    emb = m.embed.float()
    done: dict[str, dict] = {}
    for row, name in eagles.items():
        if name not in done:
            done[name] = agreement(load_draft(name).float().eval(), emb, rows)
        report["drafters"][row]["agreement"] = done[name]


def _siblings(spec: str) -> list[float | None]:
    """--siblings' values: runner-up thresholds, None for 'off' (default: the engine's)."""
    from voicepipe.nn.llm.engine import TUNINGS

    if not spec:
        return [TUNINGS.eagle_alt_min]
    out: list[float | None] = []
    for v in spec.split(","):
        try:
            out.append(None if v.strip() == "off" else float(v))
        except ValueError:
            raise SystemExit(f"--siblings: {v!r} is neither a number nor 'off'") from None
    return out


def _stores(spec: str) -> list[bool]:
    """--store's values (default: the engine's, i.e. on where the draft ships one)."""
    out = []
    for v in (spec or "on").split(","):
        if v.strip() not in ("on", "off"):
            raise SystemExit(f"--store: {v!r} is neither 'on' nor 'off'")
        out.append(v.strip() == "on")
    return out


def _with_store(dec, on: bool):
    """The decoder without its hybrid's reply store when not on (spec.replies)."""
    from voicepipe.speculative.hybrid import HybridProposer

    if not on and isinstance(dec.proposer, HybridProposer):
        dec.proposer.store = None
    return dec


def _with_siblings(dec, alt: float | None):
    """The decoder with its EAGLE proposer's runner-up threshold set to alt."""
    from voicepipe.nn.llm.draft_spec import EagleProposer
    from voicepipe.speculative.hybrid import HybridProposer

    p = dec.proposer
    p = p.draft if isinstance(p, HybridProposer) else p
    if isinstance(p, EagleProposer):
        p.alt_min = alt
    return dec


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "draft",
        help="greedy speculative decoding speedup and acceptance of the LLM draft (JSON)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--drafters",
        default="",
        help="comma list: EAGLE draft names / checkpoint paths, 'ngram', or "
        "'ngram+<draft>' (default: the configured llm.drafter)",
    )
    p.add_argument(
        "--n",
        type=int,
        default=0,
        help="prompts (default 0: the whole set; assistant: 40)",
    )
    p.add_argument(
        "--prompts",
        choices=("assistant", "grounded", "open"),
        default="assistant",
        help="held-out assistant-style prompts (default), bench llm's input-grounded ones (4), "
        "or 46 hand-written open questions from none of the training templates",
    )
    p.add_argument("--k", type=int, default=2, help="initial draft length K (default 2)")
    p.add_argument(
        "--k-max",
        type=int,
        default=3,
        help="largest K adaptive K may reach (default 3: a target pass over K+1 rows "
        "costs ~1 + 0.2·K decode steps here, so longer drafts rarely pay)",
    )
    p.add_argument("--fixed-k", action="store_true", help="keep K fixed (no adaptive K)")
    p.add_argument(
        "--engine",
        action="store_true",
        help="build each drafter with load_engine and the config's [llm] spec_k / adaptive_k, "
        "as the LLM stage does (--k, --k-max, --fixed-k ignored)",
    )
    p.add_argument(
        "--siblings",
        default="",
        help="comma list of the EAGLE draft's runner-up thresholds, 'off' for none: one row "
        "per drafter and value (default: the engine's, one row per drafter)",
    )
    p.add_argument(
        "--store",
        default="",
        help="with --engine: 'on,off' runs each drafter with and without the draft's reply "
        "store (spec.replies) behind prompt lookup, one row each (default: as the engine)",
    )
    p.add_argument("--weights", default="", help="target weight format (default: config llm)")
    p.add_argument("--max-new", type=int, default=0, help="reply cap (default: config llm)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    p.add_argument(
        "--decode-threads",
        type=int,
        default=1,
        help="fused-kernel threads of every decode pass, plain and drafted (llm.decode_threads; "
        "default 1)",
    )
    p.add_argument(
        "--agreement",
        action="store_true",
        help="also each EAGLE draft's first-guess agreement with the target, teacher-forced "
        "along the plain replies (the fit's val_top1 measure, on these prompts); with "
        "--engine, a GGUF draft model's (e.g. ngram+qwen2.5-coder-0.5b) too",
    )
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.set_defaults(func=run)
