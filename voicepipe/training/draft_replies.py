"""Replies stage of `voicepipe train draft`: the reply store for retrieval drafting.

The gen stage's replies (what the serving target says to a few thousand
training prompts) become ``spec.replies``'s store: each reply with the last
``PREFIX`` tokens of its prompt (the chat template's assistant header, so a
reply's opening words are found too), as uint16 tokens in one .npz. Greedy
replies are what serving says; replies sampled at 0.7-0.8 (``--more-data``)
word most things the same way and reach phrasings greedy decoding takes after
other contexts. The store drafts only where most occurrences agree, and
replayed on the held-out prompts the sampled replies added ~3 % to the speedup
(docs/BENCHMARKS.md, LLM drafting, "the reply store").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

PREFIX = 8  # prompt tokens kept before each reply: the template's header and a little more


def export_replies(args: argparse.Namespace) -> int:
    import torch

    from voicepipe.training.draft_paths import data_dir

    dirs = [data_dir(args.data), *(Path(d) for d in args.more_data.split(",") if d)]
    shards = [p for d in dirs for p in sorted(d.glob("gen_*.pt"))]
    for d in dirs:
        if not any(d.glob("gen_*.pt")):
            raise SystemExit(f"no gen shards in {d} (run --stage gen first)")
    recs: list[np.ndarray] = []
    reply_at: list[int] = []
    for i, path in enumerate(shards):
        for s in torch.load(path, weights_only=False):
            toks = s["tokens"].numpy()
            p = int(s["prompt_len"])
            if len(toks) <= p:
                continue
            start = max(0, p - PREFIX)
            recs.append(toks[start:].astype(np.uint16))
            reply_at.append(p - start)
        if (i + 1) % 50 == 0 or i + 1 == len(shards):
            print(f"shard {i + 1}/{len(shards)}: {len(recs)} replies", flush=True)
    lens = np.array([len(r) for r in recs], dtype=np.int64)
    out = Path(args.replies_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out,
        tokens=np.concatenate(recs),
        bounds=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
        reply_at=np.array(reply_at, dtype=np.int64),
    )
    info = {
        "out": str(out),
        "replies": len(recs),
        "reply_tokens": int(lens.sum() - sum(reply_at)),
        "bytes": out.stat().st_size,
    }
    print(json.dumps(info))
    return 0
