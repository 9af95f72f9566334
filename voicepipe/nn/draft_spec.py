"""The EAGLE-style draft behind the speculation protocols (``voicepipe.core.spec``).

An EAGLE draft reads the target's features, which the plain ``Target``
protocol does not hand out. ``FeatureTarget`` is the engine's ``ModelTarget``
keeping the (post-norm) feature of every position the target feeds;
``EagleProposer`` reads them. The pair is
built together by ``attach`` and then used like any target / proposer:

    target, proposer = attach(model, load_draft("smollm2-draft"))
    SpeculativeDecoder(target, proposer, SamplingParams(), k=4)

Greedy verification stays exact: the target's logits are computed exactly as
without the features (same ops, same rows), so output is token-identical to plain
greedy decoding (tested).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from voicepipe.core.spec import Proposal
from voicepipe.nn import llama
from voicepipe.nn.draft_model import DraftError, EagleDraft, for_inference, load
from voicepipe.nn.engine import ModelTarget, _common_prefix
from voicepipe.nn.qlinear import Linear

DEFAULT_DRAFT = "smollm2-draft"


class FeatureTarget(ModelTarget):
    """A ModelTarget that keeps the target's feature at every cached position.

    The feature is the last hidden state after the final norm (what the LM head
    reads). The model hands out the pre-norm state (``keep_features``), on the
    per-op and the fused path alike; the norm is applied here. Logits are
    untouched, so greedy verification stays exact.
    """

    def __init__(self, model: llama.Transformer, max_len: int | None = None) -> None:
        super().__init__(model, max_len)
        self.keep_features = True
        self.feats = torch.zeros(self.cache.max_len, model.args.dim)  # (Tmax, dim) fp32

    def prefill(self, tokens: list[int]) -> np.ndarray:
        logits = super().prefill(tokens)
        assert self.features is not None
        self._keep(len(self.fed) - self.features.shape[0])
        return logits

    def score(self, tokens: list[int]):  # noqa: ANN201 (Scores)
        base = self.cache.length
        s = super().score(tokens)
        self._keep(base)
        return s

    def _keep(self, base: int) -> None:
        f = self.features
        assert f is not None
        a = self.model.args
        norm = F.rms_norm(f.float(), (a.dim,), self.model.norm.float(), a.norm_eps)
        self.feats[base : base + f.shape[0]] = norm


class EagleProposer:
    """Drafts K tokens with an EagleDraft fed by a FeatureTarget (greedy drafts)."""

    def __init__(self, draft: EagleDraft, target: FeatureTarget, name: str = "") -> None:
        a = target.model.args
        if draft.args.dim != a.dim:
            raise DraftError(f"draft width {draft.args.dim} does not match the target's {a.dim}")
        if int(draft.vocab.max()) >= a.vocab_size:
            raise DraftError("draft vocabulary has ids beyond the target's vocabulary")
        self.name = name or "eagle"
        self.draft = draft.eval()
        self.t = target
        self.emb = target.model.embed  # (V, dim) the target's input embedding, frozen
        # Head over the reduced vocabulary: rows of the tied embedding, in the
        # target's own weight format (int8 by default: a quarter of fp32's bytes).
        fmt = target.model.weights
        rows = target.model.embed[draft.vocab].float()  # (Vr, dim)
        self.head = Linear(rows, None, fmt if fmt in ("fp32", "bf16", "int8") else "int8")
        self.head_dt = target.model.dtype  # the activation dtype of that format
        self.vocab = draft.vocab.tolist()
        self.cache = draft.new_cache(target.max_len)
        self.ctx: list[int] = []  # context whose true features fill the draft cache

    def reset(self) -> None:
        self.cache.reset()
        self.ctx = []

    @torch.inference_mode()
    def propose(self, context: list[int], k: int) -> Proposal:
        # Draft position j reads (f_j, E[context[j+1]]); the target holds context[:-1],
        # so true features exist for positions 0..n-1 with n = len(context) - 1.
        n = len(context) - 1
        if k <= 0 or n < 1 or self.t.length != n or n + k > self.cache.max_len:
            return Proposal(tokens=[])
        c = min(max(0, _common_prefix(self.ctx, context) - 1), self.cache.length, n - 1)
        self.cache.rollback(c)
        f = self.t.feats[c:n]  # (T, dim)
        e = self.emb[torch.as_tensor(context[c + 1 : n + 1])].float()  # (T, dim)
        h = self.draft(f[None], e[None], self.cache, c)[0, -1]  # (dim,) ≈ target feature at n
        self.ctx = list(context)
        tokens: list[int] = []
        for i in range(k):
            tok = self.vocab[int(self.head.fn(h[None].to(self.head_dt)).argmax())]
            tokens.append(tok)
            if i == k - 1:
                break
            x = self.emb[tok].float()[None, None]
            h = self.draft(h[None, None], x, self.cache, n + i)[0, -1]
        self.cache.rollback(n)  # speculative rows never stay in the cache
        return Proposal(tokens=tokens)


def draft_path(name_or_path: str = DEFAULT_DRAFT) -> Path:
    """The checkpoint file of a registry name, a directory holding one, or a file."""
    p = Path(name_or_path)
    if not p.exists():
        from voicepipe import registry

        try:
            p = registry.resolve(name_or_path)
        except Exception as e:
            raise DraftError(f"draft {name_or_path!r}: {e}") from e
    if p.is_dir():
        found = sorted(p.glob("*.pt"))
        if not found:
            raise DraftError(f"no draft checkpoint (*.pt) in {p}")
        p = found[0]
    return p


def is_eagle_draft(name_or_path: str) -> bool:
    """True for this module's drafts: a registry model of role "llm-draft" or a .pt file."""
    if name_or_path.endswith(".pt"):
        return True
    from voicepipe import registry

    try:
        return registry.get(name_or_path).role == "llm-draft"
    except Exception:  # not a manifest name (e.g. a GGUF path)
        return False


def load_draft(name_or_path: str = DEFAULT_DRAFT) -> EagleDraft:
    model, _ = load(draft_path(name_or_path))
    return model


def attach(
    model: llama.Transformer, draft: EagleDraft, max_len: int | None = None
) -> tuple[FeatureTarget, EagleProposer]:
    target = FeatureTarget(model, max_len)
    fast = for_inference(draft, model.weights if model.weights in ("bf16", "int8") else "fp32")
    return target, EagleProposer(fast, target, name="eagle")
