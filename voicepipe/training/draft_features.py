"""The target's features along a draft-data shard's replies, as `train draft`'s gen files.

The shard (``draft_shard``) keeps token ids only; ``train draft --stage fit`` reads
``gen_NNNN.pt`` files whose samples carry the target's feature at every position
(``draft_gen``). This recomputes them with one prefill per reply on the serving
target (fused int4), the shared system prompt's rows computed once and reused. A
prompt's rows but its last equal ``draft_gen.generate_one``'s bit for bit; the rest come from
one multi-row pass, as a verify pass computes them at inference, where generate_one runs
one row per pass: on this kernel build they differ by rounding (cosine > 0.99).
One gen file per shard part (parts never change once written), so a later run
converts only the parts that are new.

Each sample keeps the features of its last ``prompt_ctx`` prompt tokens only (``trim``;
default 64, 0: all): the served system prompt is ~300 of a sample's ~360 rows, the same
in every sample and never a loss position, and fit reads 12 (``--prompt-ctx``). Whole,
a 64-reply part took 105 MB (1,536 fp16 values a row): the 20k replies the draft
wants would not fit this host's free disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voicepipe.training import draft_shard as shard


def of_feats(feats: Any, r: shard.Reply) -> dict[str, Any]:
    """``draft_gen``'s sample for one reply whose positions' features are ``feats`` rows
    0 … n-2 (n: prompt and reply tokens): tokens, prompt length, feats[i] the feature whose
    logits score tokens[i+1], and a prompt index from the prompt id."""
    import torch

    toks = r.prompt + r.reply
    return {
        "tokens": torch.tensor(toks, dtype=torch.int32),
        "prompt_len": len(r.prompt),
        "feats": feats[: len(toks) - 1].to(torch.float16).clone(),
        "prompt_index": int(r.pid[:15], 16),  # (fit holds out by it: unique per prompt)
    }


def sample(ft: Any, r: shard.Reply) -> dict[str, Any]:
    """``of_feats`` after one prefill of the reply on ``ft`` (a FeatureTarget)."""
    toks = r.prompt + r.reply
    ft.prefill(toks[:-1])  # rows 0 … n-2: the prompt's common prefix with the last is kept
    return of_feats(ft.feats, r)


def trim(s: dict[str, Any], ctx: int) -> dict[str, Any]:
    """s without the prompt tokens (and features) before its last ctx (0: s whole).

    Why: with a long system prompt most of a sample is prompt, identical across
    samples and never a loss position; the draft's attention reads positions
    through RoPE, relative, so a sample cut this way is the same sample with
    less context. (The 1.5B's draft trained with ctx = 12: rows of ~50 tokens
    instead of ~150.)
    """
    lo = max(0, s["prompt_len"] - ctx) if ctx > 0 else 0
    if lo == 0:
        return s
    # (copies, not views: a view keeps, and torch.save writes, the whole storage)
    return {
        **s,
        "tokens": s["tokens"][lo:].clone(),
        "feats": s["feats"][lo:].clone(),
        "prompt_len": s["prompt_len"] - lo,
    }


def export(
    src: Path, out: Path, max_len: int = 1024, prompt_ctx: int = 64, threads: int = 1
) -> int:
    """Write ``out/gen_NNNN.pt`` for every part of the shard at ``src`` that has none,
    each sample ``trim``-med to ``prompt_ctx`` prompt tokens, each reply's pass on
    ``threads`` fused-kernel threads; returns how many were written."""
    from voicepipe.nn.llm.draft_spec import FeatureTarget
    from voicepipe.nn.llm.engine import gguf_path, shared_model

    sh = shard.Shard.load(src)
    m, _ = shared_model(gguf_path(sh.meta.model), sh.meta.weights, max_len)
    ft = FeatureTarget(m, max_len)
    ft.prefixes = None  # the previous reply's prompt is the prefix store here
    ft.prefill_threads = threads  # a whole reply per pass: compute-bound, splits well
    done = 0
    for part in sh.parts():
        if gen_path(out, part).exists():
            continue
        replies = list(shard.Shard.replies_of(part, sh.meta.prefix))
        save(out, part, [trim(sample(ft, r), prompt_ctx) for r in replies])
        done += 1
        print(f"{gen_path(out, part).name}: {len(replies)} replies", flush=True)
    return done


def gen_path(out: Path, part: Path) -> Path:
    """The gen file of shard part ``part`` (part_NNNNN.npz → gen_NNNN.pt) in ``out``."""
    return out / f"gen_{int(part.stem.split('_')[1]):04d}.pt"


def save(out: Path, part: Path, samples: list[dict[str, Any]]) -> Path:
    """``samples`` as the gen file of shard part ``part``, written whole or not at all."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    path = gen_path(out, part)
    tmp = path.with_suffix(".tmp")
    torch.save(samples, tmp)
    tmp.rename(path)  # never half a file under the final name
    return path
