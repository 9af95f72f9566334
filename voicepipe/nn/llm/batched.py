"""Several sessions' model passes as one: the weights are read once for all their rows.

Decode on this CPU is memory-bound: a SmolLM2-135M step reads ~70 MB of weights
for one token, and a pass of a few more rows costs little more than that read.
``score_batch`` runs the verify passes of several sessions (each a
``ModelTarget`` with its own KV cache and positions, sharing one model) through
one call of the fused kernel (``forward_batch``: the matrices over every row,
rotation and attention per session). The kernel's matrices are row-independent
and attention runs one row at a time, so each session's logits are
bit-identical to its own pass alone: greedy output does not depend on who else
is in the batch (tests/stages/llm/test_llm_batching.py).

Attention reads every session's own keys and values, and most of them are the
same: each session's cache starts with the system prompt's rows, copied from
the prefix cache (``nn.prefix``). A pass tells the kernel which sessions share
such a prefix (``shared_prefixes``), and it reads those rows from one session's
cache for all of them: streamed from memory once per pass and then served from
the CPU's caches, where each session used to stream its own copy (~27 MB per
session and step for the 1.5B's 459-token prompt). Same bits, same results.

Without the fused kernel (another weight format, neither AVX2 nor AVX-512) the passes run one
after another: same results, no sharing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from voicepipe.nn.llm import llama
from voicepipe.nn.llm.kv_cache import CacheFull
from voicepipe.nn.llm.target import ModelTarget
from voicepipe.nn.threads import BUDGET
from voicepipe.speculative.types import Scores

# Rows of a batched pass from which it runs on two threads (when no other call runs):
# a one-session step (1-9 rows) is memory-bound and stays on one (fused.py, llama_step).
_ROWS_FOR_TWO_THREADS = 12


@dataclass
class Pass:
    """One session's rows of a batched pass: ``ModelTarget.score``'s arguments, or (``prompt``
    set: ``Pass.prefill``, ``feed_chunks``) prompt rows ending at ``prompt``'s end, of
    which only the last row's logits come back."""

    target: ModelTarget
    tokens: list[int]
    parents: list[int] | None = None
    prompt: list[int] | None = None

    @classmethod
    def prefill(cls, target: ModelTarget, prompt: list[int]) -> Pass:
        """``target.prefill(prompt)`` as a batch row: what its caches lack of ``prompt`` (at
        least its last token), after reusing what they hold (``ModelTarget._reuse``)."""
        n = target._reuse(prompt)
        n = min(n, len(prompt) - 1)
        target.rollback(n)
        return cls(target, prompt[n:], None, prompt)


def feed_chunks(target: ModelTarget, tokens: list[int], chunk: int) -> Iterator[Pass]:
    """``ModelTarget.feed`` as batch rows: make the cache hold ``tokens[:-1]``, ``chunk``
    tokens per pass; each ``Pass`` must run (``score_batch``) before the next is taken."""
    end = len(tokens) - 1
    n = min(target._reuse(tokens), max(end, 0))
    target.rollback(n)
    while n < end:
        m = min(end, n + max(1, chunk))
        yield Pass(target, tokens[n:m], None, tokens[:m])
        n = m


def shared_prefixes(passes: list[Pass]) -> tuple[list[int], list[int]]:
    """Per pass: the index of an earlier pass whose cache starts with the same prefix-cache
    entry as its own, and that entry's length; (-1, 0) where none does. Two caches that
    hold the same tokens at the same positions hold the same keys and values (the prefix
    cache's own invariant, ``nn.prefix``), so the kernel may read either."""
    refs, lens = [-1] * len(passes), [0] * len(passes)
    first: dict[int, int] = {}  # id(entry) -> the first pass holding it
    for i, p in enumerate(passes):
        t = p.target
        store = t.prefixes
        if store is None or not len(store):
            continue
        entry = store.longest(t.fed[: t.length])
        if entry is None:
            continue
        j = first.setdefault(id(entry), i)
        if j != i:
            refs[i], lens[i] = j, len(entry.tokens)
    return refs, lens


def score_batch(
    model: llama.Transformer, passes: list[Pass], share_prefixes: bool = True
) -> list[Scores]:
    """``[p.target.score(p.tokens, p.parents) for p in passes]`` (for a ``Pass.prefill``:
    its last row's logits, as ``target.prefill``), in one pass of the model when it runs
    on the fused kernel. Every target must be over ``model``. ``share_prefixes``: read
    the prefixes the caches share once (``shared_prefixes``; off only to measure it)."""
    if not passes:
        return []
    fused = model.fused
    if fused is None or len(passes) == 1 or not hasattr(fused, "forward_batch"):
        return [_alone(p) for p in passes]
    empty = torch.empty(0)
    for p in passes:
        if p.target.model is not model:
            raise ValueError("every target of a batched pass must run the same model")
        if p.target.length + len(p.tokens) > p.target.max_len:
            raise CacheFull(f"KV cache full: {p.target.length + len(p.tokens)} positions")
    tokens = torch.tensor([t for p in passes for t in p.tokens], dtype=torch.long)
    counts = [len(p.tokens) for p in passes]
    heads = sum(1 if p.prompt is not None else len(p.tokens) for p in passes)  # logits rows
    best = torch.empty(heads, dtype=torch.long)
    # Many rows make the pass compute-bound: both cores then, unless other calls hold them.
    # A model whose decode pass is worth two threads even alone (``decode_threads``: the
    # 1.5B reads ~1 GB a step, more than one core's memory bandwidth) gets them always.
    want = max(
        2 if len(tokens) >= _ROWS_FOR_TWO_THREADS else 1,
        max(p.target.decode_threads for p in passes),
    )
    refs, lens = shared_prefixes(passes) if share_prefixes else ([], [])
    with torch.inference_mode(), BUDGET.claim(want, every_session=True) as n:
        logits = fused.forward_batch(
            tokens,
            [p.target.cache.kv for p in passes],
            [p.target.length for p in passes],
            counts,
            [p.prompt is not None for p in passes],
            [empty if p.target.feats is None else p.target.feats for p in passes],
            [list(p.parents or []) for p in passes],
            best,
            n if want > 1 else 0,
            shared_ref=refs,
            shared_len=lens,
        )
    out = []
    r0 = 0
    lg, bs = logits.numpy(), best.numpy()
    for p, n in zip(passes, counts, strict=True):
        p.target.cache.advance(p.target.length + n)
        rows = 1 if p.prompt is not None else n
        if p.prompt is not None:
            p.target.fed = list(p.prompt)
            p.target.prefilled += n
            p.target.hold(lg[r0].copy(), len(p.prompt))
        else:
            p.target.fed += p.tokens
        out.append(Scores(lg[r0 : r0 + rows], bs[r0 : r0 + rows]))
        r0 += rows
    return out


def _alone(p: Pass) -> Scores:
    if p.prompt is None:
        return p.target.score(p.tokens, p.parents)
    start = len(p.prompt) - len(p.tokens)
    return Scores(p.target._run(p.prompt, start, len(p.prompt)).numpy()[None])
