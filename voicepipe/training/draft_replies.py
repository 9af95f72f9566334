"""Replies stage of `voicepipe train draft`: the reply store for retrieval drafting.

The gen stage's replies (what the serving target says to a few thousand
training prompts) become ``spec.replies``'s store: each reply with the last
``PREFIX`` tokens of its prompt (the chat template's assistant header, so a
reply's opening words are found too), as uint16 tokens in one .npz (uint32 for a
vocabulary past 65,536: Qwen2.5's ``<|im_end|>`` is 151,645, and in uint16 every
reply's end became an ordinary token). Greedy
replies are what serving says; replies sampled at 0.7-0.8 (``--more-data``)
word most things the same way and reach phrasings greedy decoding takes after
other contexts. The store drafts only where most occurrences agree, and
replayed on the held-out prompts the sampled replies added ~3 % to the speedup
(docs/BENCHMARKS.md, LLM drafting, "the reply store").

A dir may also be a ``train draft-data`` shard (token ids, ``manifest.json``): its
replies need no features, so the store takes every reply the shard holds, also those
of parts whose gen files were never written.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

PREFIX = 8  # prompt tokens kept before each reply: the template's header and a little more


def _samples(d: Path) -> Iterator[tuple[np.ndarray, int]]:
    """(prompt and reply token ids, prompt length) of every reply in ``d``: a draft-data
    shard's (``manifest.json``) or its gen files'."""
    import torch

    from voicepipe.training.draft_shard import Shard

    if (d / "manifest.json").is_file():
        for r in Shard.load(d).replies():
            yield np.array(r.prompt + r.reply, dtype=np.int64), len(r.prompt)
        return
    for path in sorted(d.glob("gen_*.pt")):
        for s in torch.load(path, weights_only=False):
            yield s["tokens"].numpy(), int(s["prompt_len"])


def export_replies(args: argparse.Namespace) -> int:
    from voicepipe.training.draft_paths import data_dir

    dirs = [data_dir(args.data), *(Path(d) for d in args.more_data.split(",") if d)]
    for d in dirs:
        if not (d / "manifest.json").is_file() and not any(d.glob("gen_*.pt")):
            raise SystemExit(f"no gen shards in {d} (run --stage gen first)")
    recs: list[np.ndarray] = []
    reply_at: list[int] = []
    for d in dirs:
        for toks, p in _samples(d):
            if len(toks) <= p:
                continue
            start = max(0, p - PREFIX)
            recs.append(toks[start:])
            reply_at.append(p - start)
        print(f"{d}: {len(recs)} replies so far", flush=True)
    lens = np.array([len(r) for r in recs], dtype=np.int64)
    out = Path(args.replies_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    flat = np.concatenate(recs)
    np.savez_compressed(
        out,
        tokens=flat.astype(np.uint16 if flat.max(initial=0) < 1 << 16 else np.uint32),
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
