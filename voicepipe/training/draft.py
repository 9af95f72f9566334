"""`voicepipe train draft`: self-distil an EAGLE-style draft for the default LLM.

Stages under $VOICEPIPE_HOME (gen and fit resume):
- gen: the serving target (int4 weights on the fused step, one prompt at a
  time; --gen-weights bf16 runs the older batched per-op path) answers seeded
  assistant-style prompts (``draft_prompts``) greedily (or sampled, with
  --temperature, into a dir of their own for fit's --more-data); every shard of 32
  replies is stored with the target's feature at every position
  (``draft_gen``) in data/draft/. Shard s holds prompts 32·s … 32·s + 31 of
  the seed's list, so a longer --n-prompts continues where a run stopped.
- fit: trains ``voicepipe.nn.llm.draft_model.EagleDraft`` on those shards, teacher
  forced: from the target's feature at position i and the embedding of token
  i+1 it predicts the target's feature at i+1 (smooth-L1) and the target's
  next-token distribution over the reduced vocabulary (KL). Checkpoints,
  resume and a JSONL loss log live in runs/draft/.
- export: the best checkpoint as the fp16 release file (``draft_fit.export``).
- replies: the replies as the store retrieval drafting reads
  (``draft_replies``, ``spec.replies``).

CPU etiquette: run it with ``nice -n 15``; it uses one thread by default
(on this shared 2-core machine, 2 OpenMP threads under contention ran
~10× slower than one, because every op waits for the descheduled thread).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from voicepipe.config import LlmConfig
from voicepipe.training.draft_paths import data_dir

log = logging.getLogger(__name__)

# The serving default: the draft learns the replies the assistant really gives.
SYSTEM_PROMPT = LlmConfig.system_prompt


def chat(tok, prompt: str, i: int, system: str = SYSTEM_PROMPT) -> list[int]:
    """Prompt ids; every fifth prompt keeps the model's own default system prompt."""
    msgs = [{"role": "user", "content": prompt}]
    if i % 5 != 4:
        msgs.insert(0, {"role": "system", "content": system})
    return tok.chat_ids(msgs)


def gen(args: argparse.Namespace) -> int:
    import torch

    from voicepipe.nn.llm import llama
    from voicepipe.nn.llm.engine import gguf_path
    from voicepipe.nn.llm.tokenizer import ChatTokenizer
    from voicepipe.training.draft_gen import generate_batch, generate_one
    from voicepipe.training.draft_prompts import train_prompts

    torch.set_num_threads(args.threads)
    out = data_dir(args.data)
    out.mkdir(parents=True, exist_ok=True)
    prompts = train_prompts(args.n_prompts, seed=args.seed)
    m, _ = llama.load(gguf_path(args.model), args.gen_weights, max_len=2048)
    tok = ChatTokenizer(m.metadata)
    bs = args.batch
    n_shards = (len(prompts) + bs - 1) // bs
    for s in range(n_shards):
        path = out / f"gen_{s:04d}.pt"
        if path.exists():
            continue
        t0 = time.perf_counter()
        idx = range(s * bs, min(len(prompts), (s + 1) * bs))
        ids = [chat(tok, prompts[i], i) for i in idx]
        if m.fused is not None:  # the serving target itself, one prompt at a time
            stop, temp = set(tok.stop_ids), args.temperature
            samples = [
                generate_one(m, x, args.max_new, stop, temp, seed=args.seed * 1_000_003 + i)
                for i, x in zip(idx, ids, strict=True)
            ]
        elif args.temperature > 0:
            raise SystemExit("--temperature needs the fused int4 target (--gen-weights int4)")
        else:
            samples = generate_batch(m, ids, args.max_new, tok.stop_ids)
        for i, smp in zip(idx, samples, strict=True):
            smp["prompt_index"] = i
        tmp = path.with_suffix(".tmp")
        torch.save(samples, tmp)
        tmp.rename(path)  # a killed run never leaves a half-written shard
        n = sum(len(x["tokens"]) - x["prompt_len"] for x in samples)
        dt = time.perf_counter() - t0
        log.info(
            "shard %d/%d: %d reply tokens in %.1f s (%.0f tok/s)", s + 1, n_shards, n, dt, n / dt
        )
        print(f"shard {s + 1}/{n_shards} tokens={n} {n / dt:.0f} tok/s", flush=True)
    return 0


def _handler(args: argparse.Namespace) -> int:
    if args.stage in ("gen", "all"):
        rc = gen(args)
        if rc:
            return rc
    if args.stage in ("fit", "all"):
        from voicepipe.training.draft_fit import fit

        rc = fit(args)
        if rc:
            return rc
    if args.stage in ("export", "all"):
        from voicepipe.training.draft_fit import export

        rc = export(args)
        if rc:
            return rc
    if args.stage in ("replies", "all"):
        from voicepipe.training.draft_replies import export_replies

        return export_replies(args)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "draft",
        help="self-distil the EAGLE-style draft for the default LLM (gen data, then fit)",
        description=(
            "Self-distillation of the speculative-decoding draft for the default LLM. "
            "Stage 'gen' has the serving target (int4, fused step) answer seeded assistant-style "
            "prompts greedily and stores replies plus the target's features under "
            "$VOICEPIPE_HOME/data/draft; stage 'fit' trains the draft on them with checkpoints, "
            "resume and a loss log under $VOICEPIPE_HOME/runs/draft; stage 'export' writes the "
            "best checkpoint as the fp16 release file with the reduced vocabulary recounted on all "
            "data; stage 'replies' writes the greedy replies as the store retrieval drafting "
            "reads (spec.replies). gen and fit resume where a killed run stopped. "
            "Run with nice -n 15."
        ),
    )
    p.add_argument(
        "--stage",
        choices=("gen", "fit", "export", "replies", "all"),
        default="all",
        help="which stage to run (default all)",
    )
    p.add_argument("--model", default="smollm2-135m", help="target model (default smollm2-135m)")
    p.add_argument("--data", default="", help="data dir (default $VOICEPIPE_HOME/data/draft)")
    p.add_argument("--run", default="", help="run dir (default $VOICEPIPE_HOME/runs/draft)")
    p.add_argument("--n-prompts", type=int, default=3000, help="training prompts (default 3000)")
    p.add_argument("--seed", type=int, default=0, help="prompt seed (default 0)")
    p.add_argument(
        "--gen-weights",
        default="int4",
        help="gen: target weights (default int4, the serving default: fused step, "
        "batch 1; bf16 runs the batched per-op path)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="gen: sample replies at this temperature (default 0: greedy, what serving "
        "decodes); sampled replies give the same prompts other contexts, e.g. in their own "
        "--data dir, added to fit with --more-data",
    )
    p.add_argument("--batch", type=int, default=32, help="generation batch (default 32)")
    p.add_argument("--max-new", type=int, default=160, help="reply token cap (default 160)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument(
        "--vocab",
        type=int,
        default=6144,
        help="reduced draft vocabulary size (default 6144: held-out agreement as with 8192)",
    )
    p.add_argument("--steps", type=int, default=3000, help="fit: optimizer steps (default 3000)")
    p.add_argument(
        "--ffn-dim",
        type=int,
        default=0,
        help="fit: the draft layer's FFN width (default 0: the target's, or with --init the "
        "trained draft's); a narrower one starts from the target's strongest channels (a 1.5B "
        "target's 8960 makes a 100 MB draft); wider than --init's draft keeps its channels and "
        "adds the target's next-strongest, their outputs starting at zero",
    )
    p.add_argument(
        "--prompt-ctx",
        type=int,
        default=0,
        help="fit: keep only this many prompt tokens before each reply (default 0: all); "
        "a long system prompt is otherwise most of every training row",
    )
    p.add_argument("--lr", type=float, default=1e-3, help="fit: peak learning rate")
    p.add_argument("--bs", type=int, default=8, help="fit: sequences per step (default 8)")
    p.add_argument(
        "--init",
        default="",
        help="fit: start from this draft checkpoint (fine-tune) instead of the target's last layer",
    )
    p.add_argument(
        "--val-shard",
        default="0",
        help="fit: index (or comma list) of the held-out gen shards, never trained on (default 0)",
    )
    p.add_argument(
        "--recent-from",
        type=int,
        default=0,
        help="fit: shards from this index on are the 'recent' ones (e.g. 39, the first shard "
        "answered by the int4 fused target) for --recent-share",
    )
    p.add_argument(
        "--recent-share",
        type=float,
        default=0.0,
        help="fit: share of every batch drawn from the recent shards (default 0: all shards alike)",
    )
    p.add_argument(
        "--more-data",
        default="",
        help="fit, replies: comma-separated extra gen dirs (e.g. sampled replies); in fit they "
        "join the recent pool, minus the replies to the held-out shards' prompts; in replies "
        "the store takes all their replies",
    )
    p.add_argument(
        "--depths",
        type=int,
        default=1,
        help="fit: also train each row drafted 2..N tokens deep on its own predictions "
        "(training-time test; N times the cost per step; default 1: teacher forced only)",
    )
    p.add_argument(
        "--depth-weight",
        type=float,
        default=0.8,
        help="fit: loss weight of each further depth with --depths (its power; default 0.8)",
    )
    p.add_argument(
        "--qat",
        action="store_true",
        help="fit: train through the fused draft's rounding (int4 layer, int8 fc; "
        "straight-through gradients)",
    )
    p.add_argument(
        "--out",
        default="models/smollm2-draft/smollm2-draft.pt",
        help="export: release checkpoint path (default models/smollm2-draft/…)",
    )
    p.add_argument(
        "--replies-out",
        default="models/smollm2-draft/replies.npz",
        help="replies: reply store path (default models/smollm2-draft/replies.npz)",
    )
    p.set_defaults(func=_handler)


def read_log(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
