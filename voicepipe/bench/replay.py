"""`voicepipe bench replay`: speculative speedups replayed exactly, free of machine load.

Greedy speculation always emits the target's greedy reply, and at every
position of it each drafter's proposal is fixed (prompt lookup reads the
context; the EAGLE draft reads the target's features of it). This bench
decodes each prompt's greedy reply once, records at every position what
prompt lookup and the EAGLE draft would propose and how many tokens of it the
reply confirms (``spec.replay.Site``), measures in the same run the cost
of a verifying pass over T rows and of a draft step (best-of, in one-row
decodes), and replays each drafting policy over the sites
(``spec.replay``): the passes it would run, their cost, the speedup.

Policies: ``ngram`` / ``eagle`` / ``hybrid`` as the engine builds them
(``load_engine``'s K, caps and thresholds); the engine's first rules:
``ngram_uncapped`` (prompt lookup: up to K tokens whatever its match, 2-grams
up, pausing below 0.5 accepted per pass), ``eagle_k2_always`` (the EAGLE
draft: always 2 guesses) and ``hybrid_uncapped_k2`` (both, lookup from
3-token matches); ``eagle_k3_always`` and
``hybrid_lookup_from_3``, ``eagle_path_*`` / ``hybrid_path_*`` (the
draft's confidence threshold at 0.2, 0.3 or 0.5 instead of the engine's eagle_min_path),
``eagle_k4`` / ``hybrid_k4`` (up to 4 guesses instead of its eagle_k),
``eagle_tree_*`` / ``hybrid_tree_*`` (other runner-up thresholds than
eagle_alt_min, or the second likeliest only): one setting of the engine's rule
changed. The engine's rule (``eagle``, ``hybrid``) includes the runner-ups
(a draft tree); ``*_chain`` leaves them out. ``hybrid`` also drafts from the
draft's reply store (spec.replies) where lookup has no match, as the engine
does, and in place of a short lookup match where the store is sure;
``hybrid_no_store`` never drafts from the store, ``hybrid_lookup_first``
never in place of lookup, ``hybrid_store_min_n_*`` / ``hybrid_store_path_*``
move its thresholds. Lookup is
traced with max_n 8, so the first rules' rows (max_n 4) may match a longer
n-gram than that rule did. ``first_guess``: how often each drafter's first
guess is right, by lookup's match order, by the draft's confidence and by
the share of the store's occurrences behind its first token.
``oracle`` / ``oracle_draft``: upper bounds, not policies: every drafter (or
the EAGLE draft alone) drafting exactly as far as the reply confirms, so no
rule over these drafters can beat them. ``chain_model``: what a chain whose
every guess holds with one probability α gets at this run's pass costs, at
the draft's measured first-guess share (held beside ``eagle_chain``) and the
α each of ``--goals`` needs: the agreement a draft must reach on this machine.
Wall-clock speedups stay ``bench llm`` / ``bench draft``'s job: this one
leaves out per-pass Python overhead and cache effects between passes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# How many guesses the EAGLE draft is traced deep at every position: what the draft-only
# policies, the oracles and the chain model can draft.
DRAFT_DEPTH = 4


def _sites(eng, ids: list[int], max_new: int, stop: set[int]) -> list:
    """The reply's Site per position (sites[i]: after its first i+1 tokens)."""
    from voicepipe.speculative.ngram import NgramProposer
    from voicepipe.speculative.replay import Site

    fork = eng.fork()
    target, eagle = fork.target, fork.proposer.draft
    eagle.min_path = 0.0  # trace every guess; policies cut by confidence in replay
    lookup = NgramProposer(max_n=8, min_n=1)
    replies = eng.replies
    out = [int(target.prefill(ids).argmax())]
    seen: list[tuple[int, list[int], list[int], list, tuple]] = []
    while len(out) < max_new and out[-1] not in stop:
        ctx = ids + out
        order, start = lookup.lookup(ctx)
        cont = ctx[start : start + 16] if order else []
        guess = eagle.propose(ctx, DRAFT_DEPTH).tokens
        stored: tuple = (0, [], [])  # the store's match, continuation, shares (no threshold)
        if replies is not None:
            m = replies.match(ctx)
            if m.order:
                stored = (m.order, *replies.continuation(m, 8, 0.0))
        seen.append((order, cont, guess, list(eagle.guesses), stored))
        out.append(int(target.score([out[-1]]).logits[-1].argmax()))

    def ok(p: list[int], i: int) -> int:
        n = 0
        while n < len(p) and i + 1 + n < len(out) and p[n] == out[i + 1 + n]:
            n += 1
        return n

    def site(i: int, order: int, cont: list[int], guess: list[int], gs: list, st: tuple) -> Site:
        c = ok(guess, i)
        j = i + 1 + c  # the reply's token where the guesses first go wrong
        rank = 0  # which runner-up there is that token (0: none)
        if c < len(gs) and j < len(out):
            alts = [eagle.vocab[r] for r in gs[c].rows[1:]]
            rank = alts.index(out[j]) + 1 if out[j] in alts else 0
        confs, alt_confs = tuple(g.conf for g in gs), tuple(g.confs[1:] for g in gs)
        s_order, s_toks, s_shares = st
        return Site(
            order, len(cont), ok(cont, i), confs, c, alt_confs, rank,
            s_order, tuple(s_shares), ok(s_toks, i),
        )  # fmt: skip

    return [site(i, *x) for i, x in enumerate(seen[: len(out) - 1])]


def _draft_step_cost(eng, ids: list[int], n: int = 30) -> float:
    """One EAGLE draft step right after a target decode, in one-row decodes (best of n each)."""
    import torch

    with torch.inference_mode():  # the per-op draft (no fused kernel) builds autograd-free
        return _timed_steps(eng, ids, n)


def _timed_steps(eng, ids: list[int], n: int) -> float:
    import torch

    from voicepipe.nn.llm import llama

    fork = eng.fork()
    target, runner = fork.target, fork.proposer.draft.runner
    target.prefill(ids)
    cache = runner.new_cache(64)
    dim = eng.model.args.dim
    h = torch.zeros(1, dim)
    base = target.cache.length
    best_t = best_d = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        llama.verify(eng.model, target.cache, [ids[-1]])
        t1 = time.perf_counter()
        runner.step(cache, h, ids[-1:], 0)
        t2 = time.perf_counter()
        target.cache.rollback(base)
        cache.rollback(0)
        best_t, best_d = min(best_t, t1 - t0), min(best_d, t2 - t1)
    return best_d / best_t


def _chain_model(costs, sites: list, goals: str) -> dict:
    """What a chain drafter whose every guess holds with one probability α gets at this
    run's pass costs (``spec.replay.chain_speedup``, K ≤ DRAFT_DEPTH): at α = the draft's measured
    first-guess share (to hold beside the replayed ``eagle_chain``: how far the model is
    from the real draft), and the α each speedup in ``goals`` needs."""
    from voicepipe.speculative import replay as R

    traced = [s for s in sites if s.eagle_confs]
    alpha = sum(s.eagle_ok > 0 for s in traced) / max(1, len(traced))
    return {
        "first_guess": round(alpha, 3),
        "speedup_at_first_guess": round(
            max(R.chain_speedup(alpha, costs, k) for k in range(1, DRAFT_DEPTH + 1)), 3
        ),
        "agreement_needed": {
            g: R.agreement_for(float(g), costs, DRAFT_DEPTH) for g in goals.split(",")
        },
    }


def draft_of(drafter: str) -> str:
    """The EAGLE draft a ``llm.drafter`` setting names (``DrafterSpec.parse``), or "" when
    it names none ("ngram", "none", a GGUF draft model): the config's model's draft."""
    from voicepipe.nn.llm.draft_spec import is_eagle_draft
    from voicepipe.speculative.drafter import DrafterSpec

    spec = DrafterSpec.parse(drafter, is_eagle=is_eagle_draft)
    return spec.name if spec.kind == "eagle" else ""


def run(args: argparse.Namespace) -> int:
    import torch

    from voicepipe.bench.common import cpu
    from voicepipe.bench.llm import PROMPTS, verify_costs
    from voicepipe.nn.llm import engine as E
    from voicepipe.speculative import replay as R
    from voicepipe.speculative.adaptive import AdaptiveK
    from voicepipe.speculative.drafter import HYBRID
    from voicepipe.training.draft_prompts import OPEN_PROMPTS, heldout_prompts

    T = E.TUNINGS

    torch.set_num_threads(args.threads)
    cfg = args.config.llm
    draft = args.draft or draft_of(cfg.drafter)
    if not draft:
        raise SystemExit(
            f"bench replay: the config's drafter {cfg.drafter!r} has no EAGLE draft; "
            "name one with --draft (e.g. --draft qwen2.5-coder-1.5b-draft)"
        )
    eng = E.load_engine(cfg.model, cfg.weights, f"{HYBRID}{draft}", k=cfg.spec_k, max_len=2048)
    tok = eng.tokenizer
    system = [{"role": "system", "content": cfg.system_prompt}] if cfg.system_prompt else []
    if args.prompts in ("assistant", "open"):
        texts = heldout_prompts(args.n) if args.prompts == "assistant" else OPEN_PROMPTS[: args.n]
        msgs = [[*system, {"role": "user", "content": q}] for q in texts]
    else:  # bench llm's sets, as bench llm renders them (no system prompt)
        texts = PROMPTS[args.prompts][: args.n]
        msgs = [[{"role": "user", "content": q}] for q in texts]
    stop = set(tok.stop_ids)
    sites = []
    for i, m in enumerate(msgs):
        sites.append(_sites(eng, tok.chat_ids(m), args.max_new, stop))
        if not args.json:
            print(f"[{i + 1}/{len(msgs)}] {len(sites[-1]) + 1} tokens", file=sys.stderr)
    ids = tok.chat_ids(msgs[0])
    vc = verify_costs(eng.model, ids, passes=40)  # the replay's only timing: make it solid
    costs = R.Costs([vc["verify_cost"][t] for t in sorted(vc["verify_cost"])],
                    _draft_step_cost(eng, ids))  # fmt: skip
    k = cfg.spec_k

    def ctl(k_max: int, verify_cost: float = 1.0):
        return lambda: AdaptiveK.for_text(k, k_max=k_max, verify_cost=verify_cost)

    def tree(k_max: int = T.eagle_k, min_path: float = T.eagle_min_path,
             alt_min: float = T.eagle_alt_min, alts: int = 2) -> R.Choice:  # fmt: skip
        return R.eagle_tree(k_max, min_path, alt_min, alts)

    # The engine's reply store where the draft ships one (E.shared_replies), else none.
    engine_store = R.store(T.store_min_n, T.store_min_path) if eng.replies is not None else None

    def behind_lookup(
        draft: R.Choice,
        min_n: int = T.lookup_min_n,
        replies: R.Choice | None = engine_store,
        first_order: int = T.store_first_order,
    ) -> R.Choice:
        look = R.ngram(min_n=min_n)
        return R.hybrid(look, draft, min_n, replies, first_order, T.store_first_share)

    hyb = ctl(T.lookup_k_max)
    chain = R.eagle(T.eagle_k, T.eagle_min_path)  # a chain: no runner-ups (before draft trees)
    policies = {
        "ngram": (R.ngram(), ctl(8)),
        "ngram_uncapped": (R.ngram(min_n=2, cap_by_order=False), ctl(8, 1.5)),
        "eagle": (tree(), ctl(T.eagle_k)),
        "eagle_chain": (chain, ctl(T.eagle_k)),
        "eagle_k2_always": (R.eagle(2), ctl(2)),
        "eagle_k3_always": (tree(3, 0.0), ctl(3)),
        "hybrid": (behind_lookup(tree()), hyb),
        "hybrid_no_store": (behind_lookup(tree(), replies=None), hyb),
        "hybrid_lookup_first": (behind_lookup(tree(), first_order=0), hyb),  # store after lookup
        "hybrid_chain": (behind_lookup(chain), hyb),
        "hybrid_lookup_from_3": (behind_lookup(tree(), 3), hyb),
        "hybrid_uncapped_k2": (R.hybrid(R.ngram(min_n=3, cap_by_order=False), R.eagle(2), 3), hyb),
        # A fourth guess (traced up to 4) when the draft is sure of all of them.
        "eagle_k4": (tree(4), ctl(4)),
        "hybrid_k4": (behind_lookup(tree(4)), hyb),
    }
    for p in (0.2, 0.3, 0.5):  # the EAGLE threshold moved: do rows pay for less sure guesses?
        policies[f"eagle_path_{p}"] = (tree(min_path=p), ctl(T.eagle_k))
        policies[f"hybrid_path_{p}"] = (behind_lookup(tree(min_path=p)), hyb)
    # Other runner-up thresholds, and the second likeliest alone.
    for a, n in ((0.05, 2), (0.1, 2), (0.3, 2), (T.eagle_alt_min, 1)):
        label = f"{a}" if n == 2 else f"{a}_second_only"
        policies[f"eagle_tree_{label}"] = (tree(alt_min=a, alts=n), ctl(T.eagle_k))
        policies[f"hybrid_tree_{label}"] = (behind_lookup(tree(alt_min=a, alts=n)), hyb)
    if eng.replies is not None:  # the store's thresholds moved, one at a time
        for n in (3, 4):
            policies[f"hybrid_store_min_n_{n}"] = (
                behind_lookup(tree(), replies=R.store(n, T.store_min_path)),
                hyb,
            )
        for p in (0.5, 0.9):
            policies[f"hybrid_store_path_{p}"] = (
                behind_lookup(tree(), replies=R.store(T.store_min_n, p)),
                hyb,
            )

    # Upper bounds, not policies: every source (or the draft alone) drafted exactly as far
    # as the reply confirms, at the engine's largest K (the draft is traced DRAFT_DEPTH deep).
    def fixed() -> AdaptiveK:
        return AdaptiveK(T.lookup_k_max, k_max=T.lookup_k_max, adaptive=False)

    policies["oracle"] = (R.oracle(replies=eng.replies is not None), fixed)
    policies["oracle_draft"] = (R.oracle(lookup=False, replies=False), fixed)
    rows = {}
    for name, (choose, make_k) in policies.items():
        tot = R.Replay()
        for s in sites:
            tot.add(R.replay(s, choose, costs, make_k))
        rows[name] = {
            "speedup": round(tot.speedup, 3),
            "tokens": tot.tokens,
            "passes": tot.passes,
            "tokens_per_pass": round(tot.tokens / max(1, tot.passes), 3),
            "cost_per_pass": round(tot.cost / max(1, tot.passes), 3),
        }
    report = {
        "machine": {"cpu": cpu(), "threads": args.threads, "loadavg": os.getloadavg()[0]},
        "model": cfg.model,
        "weights": cfg.weights,
        "draft": draft,
        "prompts": args.prompts,
        "n_prompts": len(msgs),
        "max_new_tokens": args.max_new,
        "verify_cost": vc["verify_cost"],
        "draft_step_cost": round(costs.draft_step, 3),
        "policies": rows,
        "first_guess": R.first_guess_accuracy([x for s in sites for x in s]),
        "chain_model": _chain_model(costs, [x for s in sites for x in s], args.goals),
    }
    print(json.dumps(report, indent=None if args.json else 2))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="speculative drafting policies replayed exactly on real replies (JSON)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--prompts",
        choices=("assistant", "grounded", "open"),
        default="assistant",
        help="held-out assistant-style prompts (default), bench llm's grounded set, or 30 "
        "hand-written open questions from none of the training templates",
    )
    p.add_argument("--n", type=int, default=40, help="prompts (default 40; grounded has 4)")
    p.add_argument("--max-new", type=int, default=160, help="reply cap (default 160)")
    p.add_argument(
        "--draft",
        default="",
        help="EAGLE draft (default: the config's llm.drafter's, e.g. qwen2.5-coder-1.5b-draft "
        "for the default 1.5B, smollm2-draft with --config configs/fast.toml)",
    )
    p.add_argument(
        "--goals",
        default="1.5,1.8,2.2",
        help="speedups (comma list) whose needed per-guess agreement chain_model reports "
        "(default 1.5,1.8,2.2)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.set_defaults(func=run)
