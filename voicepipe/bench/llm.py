"""`voicepipe bench llm [--quick] [--json]`: speed of the LLM engine and of speculation.

Prints one JSON object:

  models:   one row per model and weight format: load_s (GGUF → ready; after a
            first load, from the packed-weights cache: voicepipe/nn/llm/packed.py),
            ttft_ms (prefill of a ~100-token chat prompt → first token),
            tpot_ms and decode_tok_s (plain greedy decode, best of --repeats
            runs of --tokens tokens; the machine is shared, so best-of
            filters other people's load out), and verify_ms / verify_cost:
            one verifying pass over T = 1..9 rows, in ms and in one-row
            decodes (what a drafter's accepted tokens per pass must beat).
  drafters: one row per model, drafter and prompt set: speedup of greedy
            speculative decoding over plain greedy decoding (wall time from
            the first token to the last, same prompts, same token budget;
            speedup_with_prefill counts the prompt prefill too), whether the output was
            token-identical, acceptance rate, mean accepted length,
            acceptance by draft position, and time in propose / score / verify.

Prompt sets: "assistant" (open questions a voice assistant gets) and
"grounded" (summarise / quote / repeat a text given in the prompt, where
replies copy spans of their input). The Qwen2.5-Coder 1.5B / 0.5B pair is
benchmarked when both are pulled (`voicepipe models pull qwen2.5-coder-1.5b
qwen2.5-coder-0.5b`), or with --pair: the 0.5B draft alone, the same draft
behind prompt lookup (``ngram+qwen2.5-coder-0.5b``), and prompt lookup alone on
the grounded set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from voicepipe.bench.common import cpu

PASSAGE = (
    "The Riverside Library will close for renovation from March 3 to April 14. During the "
    "closure, borrowed books can be returned at the Market Street branch, which will extend "
    "its opening hours until 8 pm on weekdays. Children's reading sessions move to the "
    "community centre on Elm Road every Saturday at 10 am. The renovated library will have "
    "a new study room with 40 seats, faster wireless internet, and a café on the ground floor."
)
RECIPE = (
    "To make the bread, mix 500 grams of flour with 10 grams of salt and 7 grams of dried "
    "yeast. Add 320 millilitres of warm water and knead the dough for ten minutes until it is "
    "smooth. Leave it to rise in a warm place for one hour, shape it into a loaf, and bake it "
    "at 220 degrees for 30 minutes."
)
PROMPTS = {
    "assistant": [
        "What are three simple ways to sleep better?",
        "Explain what a rainbow is to a seven-year-old.",
        "How do I boil an egg so the yolk stays soft?",
        "Give me a short tip for staying focused while working from home.",
    ],
    "grounded": [
        f"Summarise this notice in two sentences.\n\n{PASSAGE}",
        f'Repeat the following text exactly, word for word:\n\n"{RECIPE}"',
        f"Quote the sentence about children's reading sessions from this notice.\n\n{PASSAGE}",
        f"List the steps of this recipe as a numbered list.\n\n{RECIPE}",
    ],
}
TTFT_PROMPT = (
    "I am planning a weekend trip to the mountains with two friends. We want to hike for a "
    "few hours each day, eat well, and be back home by Sunday evening. We have a small car, "
    "a modest budget, and none of us has been to the area before. What should we pack, how "
    "should we plan the hikes, and what should we keep in mind about the weather?"
)
PAIR = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "llm",
        help="LLM decode speed per weight format, and speculative speedups (JSON)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="int8 + int4 only, 2 prompts per set, 48 tokens (about a minute)",
    )
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--tokens", type=int, default=0, help="tokens per generation")
    p.add_argument("--repeats", type=int, default=3, help="decode runs per row (best kept)")
    p.add_argument("--weights", default="", help="comma-separated formats to bench")
    p.add_argument(
        "--pair",
        action="store_true",
        help="also the Qwen2.5-Coder 1.5B target / 0.5B draft pair (must be pulled)",
    )
    p.add_argument("--no-pair", action="store_true", help="skip the Qwen pair even if pulled")
    p.add_argument(
        "--pair-prompts",
        type=int,
        default=2,
        help="prompts per set for the pair (default 2: the 1.5B decodes ~10x slower)",
    )
    p.add_argument(
        "--pair-tokens",
        type=int,
        default=48,
        help="tokens per generation for the pair (default 48)",
    )
    p.add_argument("--no-drafters", action="store_true", help="model rows only")
    p.add_argument(
        "--no-aten",
        action="store_true",
        help="skip the per-op (kernels off) row beside a fused one: on a loaded machine "
        "the 1.5B's takes most of the run",
    )
    p.add_argument("--k", type=int, default=0, help="draft length (default: the config's)")
    p.add_argument(
        "--peer",
        choices=["llamacpp"],
        help="also the same GGUF decoded by llama.cpp (needs llama-cpp-python; --threads threads)",
    )
    p.add_argument(
        "--interleave",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="with --peer: also alternate 8 tokens of the first model row's model and 8 of "
        "llama.cpp for ROUNDS rounds (one load window for both: a ratio on a shared machine)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="only where a fused verifying pass's time goes (per matrix, attention, "
        "quantisation, barriers), at 1 and --threads threads and --profile-rows rows",
    )
    p.add_argument(
        "--profile-rows",
        default="1,8",
        help="with --profile: comma-separated rows per pass (default 1,8)",
    )
    p.add_argument(
        "--profile-passes", type=int, default=12, help="with --profile: passes per shape"
    )
    p.set_defaults(func=run)


def _ids(engine, text: str) -> list[int]:
    return engine.tokenizer.chat_ids([{"role": "user", "content": text}])


def _generate(engine, ids: list[int], n: int, spec: bool):
    """(tokens, seconds, decode seconds, metrics) of one greedy generation on a fresh cache.

    Decode seconds run from the first token (the target's prompt prefill, the
    same with or without a drafter, is left out) to the last; a draft model's
    own prefill of the prompt falls inside them.
    """
    from dataclasses import replace

    from voicepipe.nn.llm.engine import ModelTarget

    target = ModelTarget(engine.model, len(ids) + n + 16)
    prop = None
    if spec:  # an EAGLE draft reads its own session's target: take the fork's pair
        fork = engine.fork()
        prop = fork.proposer
        if engine.eagle is not None:
            target = fork.target
    # The engine's own decoder on this target and proposer: every K setting as the
    # LLM stage runs it (a hand-built copy here once missed the draft cost).
    dec = replace(engine, target=target, proposer=prop).decoder()
    t0 = time.perf_counter()
    out: list[int] = []
    t_first = t0
    for step in dec.generate(ids, n, engine.tokenizer.stop_ids):
        if not out:
            t_first = time.perf_counter()
        out += step
    t_end = time.perf_counter()
    return out, t_end - t0, t_end - t_first, dec.metrics


def model_row(
    name: str, weights: str, n: int, repeats: int, kernels: bool = True, threads: int = 1
) -> dict:
    from voicepipe.nn.llm import llama
    from voicepipe.nn.llm.engine import ModelTarget, gguf_path
    from voicepipe.nn.llm.tokenizer import ChatTokenizer

    # threads: the fused kernel's own team (the per-op path follows torch.set_num_threads);
    # without it the fused row ran on one thread whatever --threads said.
    m, load_s = llama.load(gguf_path(name), weights, max_len=1024, kernels=kernels, threads=threads)
    tok = ChatTokenizer(m.metadata)
    ids = tok.chat_ids([{"role": "user", "content": TTFT_PROMPT}])
    ttft, tpot = [], []
    for _ in range(repeats):
        t = ModelTarget(m, len(ids) + n + 8)
        t0 = time.perf_counter()
        nxt = int(t.prefill(ids).argmax())
        ttft.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(n):  # fixed length: no stop token, so every run decodes n tokens
            nxt = int(llama.decode_step(m, t.cache, nxt).argmax())
        tpot.append((time.perf_counter() - t0) / n)
    best = min(tpot)
    row = {
        "model": name,
        "weights": weights,
        "kernel": m.kernel,
        "threads": threads,
        "params_m": round(m.n_params / 1e6, 1),
        "load_s": round(load_s, 2),
        "prompt_tokens": len(ids),
        "ttft_ms": round(min(ttft) * 1e3, 1),
        "tpot_ms": round(best * 1e3, 2),
        "decode_tok_s": round(1 / best, 1),
        "decode_tok_s_median": round(1 / sorted(tpot)[len(tpot) // 2], 1),
    }
    row.update(verify_costs(m, ids))
    row["served_context"] = served_context_cost(m, ids, served_ids(tok))
    return row


def served_ids(tok) -> list[int]:
    """A served turn's prompt with the default config: the system prompt and the tools
    block the server renders (voicepipe/stages/llm/tools.py), then a short question.
    Several times the length of the bench's own prompt, and a pass's attention reads the
    whole cache: llm.tpot in ``bench e2e`` decodes at this context, not at that one."""
    from voicepipe.config import Config
    from voicepipe.stages.llm.tools import active_tools, system_prompt

    cfg = Config()
    box = active_tools(cfg, tok)
    kw = {"tools": box.specs()} if box else {}
    sys_msg = {"role": "system", "content": system_prompt(cfg, box)}
    return tok.chat_ids([sys_msg, {"role": "user", "content": SERVED_QUESTION}], **kw)


SERVED_QUESTION = "What's the weather like in Paris today, and should I take an umbrella?"


def served_context_cost(m, ids: list[int], served: list[int], passes: int = 12) -> dict:
    """One-row decode passes at the end of ``ids`` (the bench's prompt) and of ``served``
    (a served turn's), interleaved, best of ``passes`` each: what the served context
    alone adds to a decode step, in the same process and load window."""
    from voicepipe.nn.llm import llama

    caches = []
    for p in (ids, served):
        cache = m.new_cache(len(p) + 2)
        llama.prefill(m, cache, p[:-1])
        caches.append((cache, cache.length, p[-1]))
    best = [float("inf")] * len(caches)
    for _ in range(passes):
        for i, (cache, base, last) in enumerate(caches):
            t0 = time.perf_counter()
            llama.decode_step(m, cache, last)
            best[i] = min(best[i], time.perf_counter() - t0)
            cache.rollback(base)
    return {
        "context": [len(ids), len(served)],
        "tpot_ms": [round(b * 1e3, 2) for b in best],
        "ratio": round(best[1] / best[0], 3),
    }


VERIFY_ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 9)


def verify_costs(m, ids: list[int], passes: int = 12) -> dict:
    """What a verifying pass over T rows costs, in ms and in one-token decodes.

    Speculation pays when a pass's accepted tokens outnumber its cost in
    decodes, so this curve is what a drafter's K has to beat. Each T is timed
    best-of-``passes``, interleaved over T (a shared machine's load hits all
    alike), at the end of the prompt with the cache rolled back after each pass.
    """
    from voicepipe.nn.llm import llama

    cache = m.new_cache(len(ids) + max(VERIFY_ROWS) + 1)
    llama.prefill(m, cache, ids)
    base = cache.length
    best = dict.fromkeys(VERIFY_ROWS, float("inf"))
    for _ in range(passes):
        for t in VERIFY_ROWS:
            toks = ids[-t:]
            t0 = time.perf_counter()
            llama.verify(m, cache, toks)
            best[t] = min(best[t], time.perf_counter() - t0)
            cache.rollback(base)
    one = best[1]
    return {
        "verify_ms": {t: round(v * 1e3, 2) for t, v in best.items()},
        "verify_cost": {t: round(v / one, 2) for t, v in best.items()},
    }


def drafter_rows(
    model: str, drafter: str, weights: str, k: int, sets: dict, n: int, repeats: int
) -> list[dict]:
    from voicepipe.nn.llm.engine import load_engine
    from voicepipe.speculative.metrics import SpecMetrics

    eng = load_engine(model, weights, drafter, k=k, adaptive=True)
    rows = []
    for set_name, prompts in sets.items():
        plain_s = spec_s = plain_all = spec_all = 0.0
        identical = True
        metrics = SpecMetrics()
        n_tok = 0
        for text in prompts:
            ids = _ids(eng, text)
            # Interleave plain and speculative runs; best of `repeats` each (shared machine).
            p_best = s_best = p_all = s_all = float("inf")
            for _ in range(repeats):
                p_out, p_a, p_t, _ = _generate(eng, ids, n, spec=False)
                s_out, s_a, s_t, m = _generate(eng, ids, n, spec=True)
                p_best, s_best = min(p_best, p_t), min(s_best, s_t)
                p_all, s_all = min(p_all, p_a), min(s_all, s_a)
                identical &= p_out == s_out
            metrics.merge(m)
            plain_s += p_best
            spec_s += s_best
            plain_all += p_all
            spec_all += s_all
            n_tok += len(p_out)
        d = metrics.as_dict()
        rows.append(
            {
                "model": model,
                "drafter": drafter,
                "weights": weights,
                "draft_weights": None if drafter == "ngram" or eng.eagle else "int4",
                "k": k,
                "prompts": set_name,
                "n_prompts": len(prompts),
                "tokens": n_tok,
                "speedup": round(plain_s / spec_s, 3),
                "speedup_with_prefill": round(plain_all / spec_all, 3),
                "identical": identical,
                "plain_tok_s": round(n_tok / plain_s, 1),
                "spec_tok_s": round(n_tok / spec_s, 1),
                "acceptance_rate": d["acceptance_rate"],
                "mean_accepted_len": d["mean_accepted_len"],
                "accept_by_pos": d["accept_by_pos"],
                "time_propose_ms": d["time_propose_ms"],
                "time_score_ms": d["time_score_ms"],
                "time_verify_ms": d["time_verify_ms"],
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def run(args: argparse.Namespace) -> int:
    import torch

    from voicepipe import registry

    torch.set_num_threads(args.threads)
    cfg = args.config
    n = args.tokens or (48 if args.quick else 128)
    k = args.k or cfg.llm.spec_k
    formats = (
        args.weights.split(",")
        if args.weights
        else (["int8", "int4"] if args.quick else ["fp32", "bf16", "int8", "int4"])
    )
    sets = {s: p[:2] if args.quick else p for s, p in PROMPTS.items()}
    repeats = 1 if args.quick else args.repeats
    model = cfg.llm.model
    out: dict = {
        "machine": {"cpu": cpu(), "threads": args.threads, "loadavg_start": os.getloadavg()[0]},
        "tokens": n,
        "models": [],
        "drafters": [],
    }
    if args.profile:
        return _profile(args, model, formats[0], out)
    try:
        for w in formats:
            out["models"].append(model_row(model, w, n, args.repeats, threads=args.threads))
            print(json.dumps(out["models"][-1]), file=sys.stderr, flush=True)
            fused = out["models"][-1]["kernel"] != "aten"
            if w in ("int8", "int4") and fused and not args.no_aten:  # kernels off
                out["models"].append(
                    model_row(model, w, n, args.repeats, kernels=False, threads=args.threads)
                )
                print(json.dumps(out["models"][-1]), file=sys.stderr, flush=True)
        if args.peer == "llamacpp":
            out["models"].append(_peer_row(model, n, args.repeats, args.threads))
            print(json.dumps(out["models"][-1]), file=sys.stderr, flush=True)
            if args.interleave > 0:
                out["models"].append(_interleaved(model, formats[0], args.interleave, args.threads))
                print(json.dumps(out["models"][-1]), file=sys.stderr, flush=True)
        if not args.no_drafters:
            out["drafters"] += drafter_rows(model, "ngram", cfg.llm.weights, k, sets, n, repeats)
            if cfg.llm.drafter not in ("", "none", "off", "ngram"):  # the configured drafter too
                out["drafters"] += drafter_rows(
                    model, cfg.llm.drafter, cfg.llm.weights, k, sets, n, repeats
                )
        pair_ready = all(not registry.verify(x, deep=False) for x in PAIR)
        if args.pair or (pair_ready and not args.quick and not args.no_pair):
            # 1.5B decodes ~10x slower: fewer prompts and tokens keep the run bounded.
            tgt, drf = PAIR
            n_pair = args.pair_tokens
            pair_sets = {s: p[: args.pair_prompts] for s, p in PROMPTS.items()}
            for name in PAIR:
                out["models"].append(
                    model_row(name, cfg.llm.weights, n_pair, 1, threads=args.threads)
                )
                print(json.dumps(out["models"][-1]), file=sys.stderr, flush=True)
            out["drafters"] += drafter_rows(tgt, drf, cfg.llm.weights, k, pair_sets, n_pair, 1)
            # The same draft behind prompt lookup (spec.hybrid).
            out["drafters"] += drafter_rows(
                tgt, f"ngram+{drf}", cfg.llm.weights, k, pair_sets, n_pair, 1
            )
            out["drafters"] += drafter_rows(
                tgt, "ngram", cfg.llm.weights, k, {"grounded": pair_sets["grounded"]}, n_pair, 1
            )
    except registry.ModelError as e:
        print(f"voicepipe bench llm: {e}", file=sys.stderr)
        return 2
    out["machine"]["loadavg_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=None if args.json else 2))
    return 0


def _profile(args: argparse.Namespace, name: str, weights: str, out: dict) -> int:
    """--profile: llm_profile.pass_profile on the model rows' prompt, JSON under "profile"."""
    from voicepipe.bench.llm_profile import markdown, pass_profile
    from voicepipe.nn.llm import llama
    from voicepipe.nn.llm.engine import gguf_path
    from voicepipe.nn.llm.tokenizer import ChatTokenizer

    try:
        rows = tuple(int(r) for r in args.profile_rows.split(","))
    except ValueError:
        print(
            f"voicepipe bench llm: --profile-rows: not a list of integers: {args.profile_rows!r}",
            file=sys.stderr,
        )
        return 2
    if not rows or min(rows) < 1:
        print("voicepipe bench llm: --profile-rows: rows must be ≥ 1", file=sys.stderr)
        return 2
    threads = tuple(sorted({1, args.threads}))
    m, _ = llama.load(gguf_path(name), weights, max_len=1024, threads=args.threads)
    ids = ChatTokenizer(m.metadata).chat_ids([{"role": "user", "content": TTFT_PROMPT}])
    out["model"] = name
    out["weights"] = weights
    out["profile"] = pass_profile(m, ids, rows, threads, args.profile_passes)
    out["machine"]["loadavg_end"] = os.getloadavg()[0]
    print(markdown(out["profile"]), file=sys.stderr)
    print(json.dumps(out, indent=None if args.json else 2))
    return 0


def _interleaved(name: str, weights: str, rounds: int, threads: int) -> dict:
    """llm_peer.interleaved_row on the model rows' prompt."""
    from voicepipe.bench.llm_peer import interleaved_row
    from voicepipe.nn.llm import llama
    from voicepipe.nn.llm.engine import gguf_path
    from voicepipe.nn.llm.tokenizer import ChatTokenizer

    m, _ = llama.load(gguf_path(name), weights, max_len=1024, threads=threads)
    ids = ChatTokenizer(m.metadata).chat_ids([{"role": "user", "content": TTFT_PROMPT}])
    return interleaved_row(m, name, ids, rounds, threads)


def _peer_row(name: str, n: int, repeats: int, threads: int) -> dict:
    """llama.cpp on the model rows' prompt (same GGUF, same chat template)."""
    from voicepipe.bench.llm_peer import llamacpp_row
    from voicepipe.nn.llm.engine import gguf_path
    from voicepipe.nn.llm.gguf import load as load_gguf
    from voicepipe.nn.llm.tokenizer import ChatTokenizer

    tok = ChatTokenizer(load_gguf(gguf_path(name)).metadata)
    ids = tok.chat_ids([{"role": "user", "content": TTFT_PROMPT}])
    return llamacpp_row(name, ids, n, repeats, threads, verify_rows=VERIFY_ROWS)
