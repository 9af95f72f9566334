"""The EAGLE-style draft behind the speculation protocols (``voicepipe.core.spec``).

An EAGLE draft reads the target's features, which the plain ``Target``
protocol does not hand out. ``FeatureTarget`` is the engine's ``ModelTarget``
plus a tap on the model's LM head that records the (post-norm) feature of
every position the target feeds; ``EagleProposer`` reads them. The pair is
built together by ``attach`` and then used like any target / proposer:

    target, proposer = attach(model, load_draft("smollm2-draft"))
    SpeculativeDecoder(target, proposer, SamplingParams(), k=4)

Greedy verification stays exact: the target's logits are computed exactly as
without the tap (same ops, same rows), so output is token-identical to plain
greedy decoding (tested).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import torch

from voicepipe.core.spec import Proposal
from voicepipe.nn import llama
from voicepipe.nn.draft_model import DraftError, EagleDraft, for_inference, load
from voicepipe.nn.engine import ModelTarget, _common_prefix
from voicepipe.nn.qlinear import Linear

DEFAULT_DRAFT = "smollm2-draft"


class _HeadTap(threading.local):
    """Stands in for the target's output Linear: records the features it reads.

    Thread-local state: sessions share one model (``engine.shared_model``) and
    may decode in different threads; each reads the features of its own call.
    """

    def __init__(self, lin: object) -> None:
        self.lin = lin
        self.feats: torch.Tensor | None = None  # (T, dim) of the last call
        self.last_only = False

    def fn(self, x: torch.Tensor) -> torch.Tensor:
        self.feats = x
        if self.last_only:  # prefill: only the last row needs logits
            x = x[-1:]
        return self.lin.fn(x)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.lin, name)


class FeatureTarget(ModelTarget):
    """A ModelTarget that keeps the target's feature at every cached position."""

    def __init__(self, model: llama.Transformer, max_len: int | None = None) -> None:
        super().__init__(model, max_len)
        out = model.output
        self.tap = out if isinstance(out, _HeadTap) else _HeadTap(out)
        model.output = self.tap  # type: ignore[assignment]
        self.feats = torch.zeros(self.cache.max_len, model.args.dim)  # (Tmax, dim) fp32

    def prefill(self, tokens: list[int]) -> np.ndarray:
        n = _common_prefix(self.fed, tokens)
        if n == len(tokens):
            n -= 1
        self.rollback(n)
        self.tap.last_only = True
        try:
            logits = llama.forward(
                self.model, self.cache, torch.as_tensor(tokens[n:], dtype=torch.long), n
            )[-1]
        finally:
            self.tap.last_only = False
        self._keep(n)
        self.fed = list(tokens)
        return logits.numpy()

    def score(self, tokens: list[int]):  # noqa: ANN201 (Scores)
        base = self.cache.length
        s = super().score(tokens)
        self._keep(base)
        return s

    def _keep(self, base: int) -> None:
        f = self.tap.feats
        assert f is not None
        self.feats[base : base + f.shape[0]] = f.float()


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
