"""Several utterances' codec-LM passes as one: the weights are read once for all rows.

A codec-LM step is tiny (one frame, d = 256): its time is mostly the fixed cost of
each operator call, not arithmetic. So when several sessions speak at once, their
steps run as one pass: the embeddings, layer norms, projections and feed-forward
over every utterance's rows together, rotation and attention per utterance in its
own KV cache (``Block.qkv_heads`` / ``attend`` / ``finish``, the pieces of the
one-utterance ``forward``). Drafting runs in lockstep: draft step i of every
utterance that drafts at least i+1 codes is one pass of the draft model.

The LM calls a synthesis needs come out of ``nn/tts/codec_synthesis.py`` as ``Draft``
(the proposer's K codes) and ``Verify`` (the target's scores of the last code and
the drafts) values; ``run_alone`` runs one as the unbatched code did, ``run_calls``
runs any number batched. A row's numbers may differ from its pass alone in the
last float bits (a matrix product over more rows may block differently); the
acceptance rule decides on them exactly as alone (tests/nn/tts/test_codec_lm_batch.py:
the same codes on real sentences).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from voicepipe.nn.tts.codec_lm import Block, CodecLM, cached_mask
from voicepipe.nn.tts.codec_lm_decode import Cached, CodecLMProposer, CodecLMTarget
from voicepipe.speculative.types import Proposal, Scores


class Draft(NamedTuple):
    """``proposer.propose(context, k)``."""

    proposer: CodecLMProposer
    context: list[int]
    k: int


class Verify(NamedTuple):
    """``target.score(tokens)``."""

    target: CodecLMTarget
    tokens: list[int]


Call = Draft | Verify


def run_alone(call: Call) -> Proposal | Scores:
    if isinstance(call, Draft):
        return call.proposer.propose(call.context, call.k)
    return call.target.score(call.tokens)


@torch.inference_mode()
def run_calls(calls: list[Call]) -> list[Proposal | Scores]:
    """Every call's result, in order; calls on the same model share its passes."""
    out: list[Proposal | Scores | None] = [None] * len(calls)
    groups: dict[tuple[type, int], list[int]] = {}
    for i, c in enumerate(calls):
        model = c.proposer.model if isinstance(c, Draft) else c.target.model
        groups.setdefault((type(c), id(model)), []).append(i)
    for (kind, _), idx in groups.items():
        if kind is Draft:
            got: list = _draft([calls[i] for i in idx])  # type: ignore[misc]
        else:
            got = _verify([calls[i] for i in idx])  # type: ignore[misc]
        for i, r in zip(idx, got, strict=True):
            out[i] = r
    return out  # type: ignore[return-value]


def _verify(calls: list[Verify]) -> list[Scores]:
    if len(calls) == 1:
        return [run_alone(calls[0])]  # type: ignore[list-item]
    hs = run_rows(calls[0].target.model, [(c.target, [*c.target.inputs, *c.tokens]) for c in calls])
    return [c.target.scored(h[-len(c.tokens) :]) for c, h in zip(calls, hs, strict=True)]


def _draft(calls: list[Draft]) -> list[Proposal]:
    if len(calls) == 1:
        return [run_alone(calls[0])]  # type: ignore[list-item]
    model = calls[0].proposer.model
    wanted = [list(c.context) for c in calls]
    drafts: list[list[int]] = [[] for _ in calls]
    probs: list[list[np.ndarray]] = [[] for _ in calls]
    for step in range(max(c.k for c in calls)):
        live = [i for i, c in enumerate(calls) if c.k > step]
        hs = run_rows(model, [(calls[i].proposer, wanted[i]) for i in live])
        for i, h in zip(live, hs, strict=True):
            code = calls[i].proposer.pick(h[-1:], probs[i])
            drafts[i].append(code)
            wanted[i].append(code)
    return [CodecLMProposer.proposal(d, p) for d, p in zip(drafts, probs, strict=True)]


def run_rows(model: CodecLM, items: list[tuple[Cached, list[int]]]) -> list[torch.Tensor]:
    """``cached.run(wanted)`` for every item (all on ``model``) in one pass: hidden states
    (S_i, d) of each item's new positions."""
    plans = [c.rows(w) for c, w in items]
    x = torch.cat(
        [model.code_emb(torch.tensor(new, dtype=torch.long)) + cond[0] for _, new, cond in plans]
    )[None]  # (1, ΣS, d)
    rope: torch.Tensor = model.rope  # type: ignore[assignment]  # (a buffer)
    blocks: list[Block] = list(model.blocks)  # type: ignore[arg-type]
    for layer, blk in enumerate(blocks):
        qkv = blk.qkv_heads(x)  # (3, 1, H, ΣS, hd)
        ys, off = [], 0
        for (c, _), (pos, new, _) in zip(items, plans, strict=True):
            s = len(new)
            ys.append(
                blk.attend(
                    qkv[:, :, :, off : off + s],
                    rope[pos : pos + s],
                    pos,
                    cached_mask(pos, s),
                    c.cache[layer],
                )
            )
            off += s
        x = blk.finish(x, torch.cat(ys, 2))
    h = model.norm(x)[0]
    out, off = [], 0
    for (c, wanted), (_, new, _) in zip(items, plans, strict=True):
        out.append(h[off : off + len(new)])
        off += len(new)
        c.inputs = list(wanted)
    return out
