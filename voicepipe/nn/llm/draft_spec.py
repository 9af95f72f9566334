"""The EAGLE-style draft behind the speculation protocols (``voicepipe.speculative``).

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

import copy
from pathlib import Path
from typing import NamedTuple

import torch

from voicepipe.core.tokens import common_prefix
from voicepipe.nn import kernels
from voicepipe.nn.llm import fused, llama
from voicepipe.nn.llm.draft_model import DraftError, EagleDraft, for_inference, load
from voicepipe.nn.llm.kv_cache import KVCache
from voicepipe.nn.llm.qlinear import Linear
from voicepipe.nn.llm.target import ModelTarget
from voicepipe.speculative.types import Proposal

DEFAULT_DRAFT = "smollm2-draft"


class FeatureTarget(ModelTarget):
    """A ModelTarget that keeps the target's feature at every cached position.

    The feature is the last hidden state after the final norm (what the LM head
    reads), written by the model's forward into ``feats`` (on the fused path by
    the kernel itself). Logits are untouched, so greedy verification stays exact.
    """

    def __init__(self, model: llama.Transformer, max_len: int | None = None) -> None:
        super().__init__(model, max_len)
        self.feats = torch.zeros(self.cache.max_len, model.args.dim)  # (Tmax, dim) fp32
        self.tree = model.fused is not None  # the kernel scores trees of rows


class Guess(NamedTuple):
    """A draft step's head read out: its likeliest rows, argmax first, and their
    softmax probabilities (how sure the draft is of each); the rows after the
    first are a tree's siblings."""

    rows: tuple[int, ...]
    confs: tuple[float, ...]

    @property
    def row(self) -> int:
        return self.rows[0]

    @property
    def conf(self) -> float:
        return self.confs[0]


class PerOpDraft:
    """The draft's layer and head through per-op torch (the reference; non-fused targets).

    Weights only (shared by sessions); each proposer brings its own KV cache.
    """

    fused = False

    def __init__(self, draft: EagleDraft, model: llama.Transformer) -> None:
        fmt = model.weights
        self.draft = for_inference(copy.deepcopy(draft), fmt if fmt in ("bf16", "int8") else "fp32")
        self.args = draft.args
        self.vocab = draft.vocab.tolist()
        # Head over the reduced vocabulary: rows of the tied embedding, in the
        # target's own weight format (int8 by default: a quarter of fp32's bytes).
        rows = model.embed[draft.vocab].float()  # (Vr, dim)
        self.head = Linear(rows, None, fmt if fmt in ("fp32", "bf16", "int8") else "int8")
        self.head_dt = model.dtype  # the activation dtype of that format
        self.emb = model.embed  # (V, dim) the target's input embedding

    def new_cache(self, max_len: int) -> KVCache:
        return self.draft.new_cache(max_len)

    def step(
        self, cache: KVCache, f: torch.Tensor, tokens: list[int], pos: int
    ) -> tuple[torch.Tensor, Guess]:
        """Feed rows t = (f[t], embedding of tokens[t]) at pos; the last row's predicted
        feature (dim,) and what the head makes of it."""
        e = self.emb[torch.as_tensor(tokens)].float()
        h = self.draft(f[None], e[None], cache, pos)[0, -1]
        return h, _top(self.head.fn(h[None].to(self.head_dt))[0].float())


class FusedDraft:
    """The same step as ``PerOpDraft`` in one call of the fused C++ forward (kernels/llama_step).

    The draft's decoder layer is a llama layer, so it runs as a one-layer model
    on the target's kernel: the input is fc([f ; e]) and the model's final norm
    and head are the draft's norm and the reduced head. Per drafted token this
    is one kernel call (``eagle_step``: fc, layer, norm, head, argmax and its
    probability) instead of ~25 torch ops. Right after a target step, whose
    ~70 MB of weights evict the draft's from the caches, its cost is mostly the
    bytes it reads (int4 layer + head + int8 fc ≈ 4.2 MB with a 6,144-token
    head). Formats follow the target: the head rows are packed like the
    target's own head (int4 = the GGUF's Q4_1 grid, reproduced exactly by
    pack_q4; else int8).
    """

    fused = True

    def __init__(
        self,
        draft: EagleDraft,
        model: llama.Transformer,
        layer_weights: str = "",
        fc_weights: str = "int8",
    ) -> None:
        mod = kernels.llama_step()
        if mod is None or model.fused is None or draft.args.n_layer != 1:
            raise DraftError("the fused draft needs the fused target kernel and a one-layer draft")
        a = draft.args
        ly = draft.layers[0]
        mat = lambda w, fmt: fused.matrix(Linear(w.detach().float(), None, fmt))  # noqa: E731
        # Layer weights default to the target's format: int4 halves the bytes each
        # step reads and did not lower acceptance (0.55/0.24/0.09 vs 0.51/0.22/0.07
        # with int8 at K = 3 over 12 held-out prompts).
        layer_weights = layer_weights or ("int4" if model.weights == "int4" else "int8")
        mats = [mat(x.weight, layer_weights) for x in (ly.wqkv, ly.wo, ly.w13, ly.w2)]
        head = mat(model.embed[draft.vocab].float(), "int4" if model.weights == "int4" else "int8")
        # fc runs on the kernel's matrix product too (int8 activations): the target
        # streams ~70 MB per step through the caches, so every draft step reads its
        # weights from DRAM and their bytes are its cost (fp32 fc: 2.6 MB; int8: 0.7).
        fc = mat(draft.fc.weight, fc_weights)  # (dim, 2·dim)
        if head is None or fc is None or any(x is None for x in mats):
            raise DraftError("no kernel layout for the draft's matrices")
        self.args = a
        self.vocab = draft.vocab.tolist()
        emb = model.embed.float().contiguous()  # shared with the target, not copied
        norm = draft.norm.detach().float().contiguous()  # the draft's: its output feature's
        tab = draft.freqs(0, model.max_len)[:, 0]  # (Tmax, D/2) complex rotations
        empty = torch.empty(0)
        bias = empty if ly.wqkv.bias is None else ly.wqkv.bias.detach().float().contiguous()
        norms = [ly.attn_norm.detach().float().contiguous(),
                 ly.ffn_norm.detach().float().contiguous(), bias]  # fmt: skip
        self.model = mod.Model(
            a.n_head, a.n_kv_head, a.head_dim, float(a.norm_eps), emb,
            norm, tab.real.contiguous(), tab.imag.contiguous(), [norms], [mats], head,
        )  # fmt: skip
        self.model.set_input_proj(fc, draft.fc.bias.detach().float().contiguous())

    def new_cache(self, max_len: int) -> KVCache:
        a = self.args
        return KVCache(1, a.n_kv_head, max_len, a.head_dim, torch.float32)

    def step(
        self, cache: KVCache, f: torch.Tensor, tokens: list[int], pos: int
    ) -> tuple[torch.Tensor, Guess]:
        t = torch.tensor(tokens, dtype=torch.long)
        h, rows, confs = self.model.eagle_step(f.contiguous(), t, cache.kv, pos)
        cache.advance(pos + len(tokens))
        return h, Guess(tuple(rows), tuple(confs))


def _top(logits: torch.Tensor, k: int = 3) -> Guess:
    """The k likeliest rows of one row of logits and their softmax probabilities
    (as many as the kernel's eagle_step reads out)."""
    p = torch.softmax(logits, dim=-1)
    v, i = torch.topk(p, k)
    return Guess(tuple(i.tolist()), tuple(v.tolist()))


DraftRunner = PerOpDraft | FusedDraft


def prepare(
    draft: EagleDraft, model: llama.Transformer, fused: bool | None = None, **kw: str
) -> DraftRunner:
    """The draft's inference weights for this target, built once and shared by sessions.

    fused=None: on the fused kernel when the target runs on it; kw: FusedDraft's
    weight formats (layer_weights, fc_weights).
    """
    if fused is None:
        fused = model.fused is not None and kernels.llama_step() is not None
    return FusedDraft(draft, model, **kw) if fused else PerOpDraft(draft, model)


class EagleProposer:
    """Drafts up to K tokens with a prepared EAGLE draft fed by a FeatureTarget (greedy drafts).

    The runner's weights are shared; this proposer owns the draft's KV cache.
    It drafts one more token only while the draft's probability of its
    proposal so far (the product of its tokens' probabilities) is at least
    ``min_path``: the draft is well calibrated (how often its first guess is
    right, by its confidence: bench replay's ``first_guess``, docs/BENCHMARKS.md),
    so a guess after an unsure one would mostly cost a draft step and a verify
    row for nothing.

    With ``alt_min`` (and a target that scores trees), each guess's runner-ups
    are proposed as sibling leaves where the draft's probability of one (the
    guesses before it, then the runner-up) is at least alt_min: a verify row
    but no draft step, since the same head read gave it. Where the first guess
    is wrong the second likeliest is often right (bench replay; docs/BENCHMARKS.md,
    draft trees).
    """

    def __init__(
        self,
        runner: DraftRunner,
        target: FeatureTarget,
        name: str = "",
        min_path: float = 0.0,
        alt_min: float | None = None,
        window: int = 0,
    ) -> None:
        a = target.model.args
        if runner.args.dim != a.dim:
            raise DraftError(f"draft width {runner.args.dim} does not match the target's {a.dim}")
        if max(runner.vocab) >= a.vocab_size:
            raise DraftError("draft vocabulary has ids beyond the target's vocabulary")
        self.name = name or "eagle"
        self.t = target
        self.runner = runner
        self.cache = runner.new_cache(target.max_len)
        self.vocab = runner.vocab
        self.ctx: list[int] = []  # context whose true features fill the draft cache
        # The draft reads at most the last ``window`` positions of a context it has not
        # seen (0: all of it). Its cache slot 0 is context position ``off``: RoPE is
        # relative, so a cut context is the same context, shorter (as training cuts
        # each sample to its last few prompt tokens: --prompt-ctx). Why: a session's
        # first proposal ran the draft over the whole served prompt (~500 positions with
        # the tools block: ~330 ms on this host, on the first clause's critical path),
        # where it trained on 12 prompt tokens before each reply.
        self.window = window
        self.off = 0
        self.min_path = min_path
        self.alt_min = alt_min
        # What the head said at each guess it last proposed (its likeliest rows and
        # their probabilities): what a replay of drafting policies reads (bench replay).
        self.guesses: list[Guess] = []

    @property
    def confs(self) -> list[float]:
        """The draft's probability of each token it last proposed."""
        return [g.conf for g in self.guesses]

    def reset(self) -> None:
        self.cache.reset()
        self.ctx = []
        self.off = 0

    @torch.inference_mode()
    def propose(self, context: list[int], k: int) -> Proposal:
        # Draft position j reads (f_j, E[context[j+1]]); the target holds context[:-1],
        # so true features exist for positions 0..n-1 with n = len(context) - 1.
        n = len(context) - 1
        if k <= 0 or n < 1 or self.t.length != n or n + k > self.cache.max_len:
            return Proposal(tokens=[])
        m = min(len(self.ctx), len(context))
        # Usually the context extends the last one: one C-level slice compare.
        same = m if self.ctx[:m] == context[:m] else common_prefix(self.ctx, context)
        c = min(max(0, same - 1), self.off + self.cache.length, n - 1)
        if c < self.off or (self.window and n - c > self.window):
            # Changed before the cache's first row, or more to read than the window: the
            # cache starts again at the window (all of the context without one).
            self.off = max(0, n - self.window) if self.window else 0
            self.cache.reset()
            c = self.off
        off = self.off
        self.cache.rollback(c - off)
        f = self.t.feats[c:n]  # (T, dim)
        h, g = self.runner.step(self.cache, f, context[c + 1 : n + 1], c - off)  # h ≈ feature n
        self.ctx = list(context)
        tokens = [self.vocab[g.row]]
        self.guesses = [g]
        path = g.conf  # the draft's probability of its whole proposal so far
        for i in range(k - 1):
            if path < self.min_path:  # the next guess would rarely survive verification
                break
            h, g = self.runner.step(self.cache, h[None], tokens[-1:], n + i - off)
            tokens.append(self.vocab[g.row])
            self.guesses.append(g)
            path *= g.conf
        self.cache.rollback(n - off)  # speculative rows never stay in the cache
        # The verify pass feeds the last token, the guesses and the siblings from slot n.
        room = self.t.max_len - n - 1 - len(tokens)
        return Proposal(tokens=tokens, siblings=self._siblings()[: max(0, room)])

    def _siblings(self) -> tuple[tuple[int, int], ...]:
        if self.alt_min is None or not self.t.tree:
            return ()
        out, path = [], 1.0
        for d, g in enumerate(self.guesses):
            out += [
                (d, self.vocab[r])
                for r, p in zip(g.rows[1:], g.confs[1:], strict=True)
                if path * p >= self.alt_min
            ]
            path *= g.conf
        return tuple(out)


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
    model: llama.Transformer,
    draft: EagleDraft | DraftRunner,
    max_len: int | None = None,
    fused: bool | None = None,
    name: str = "eagle",
    min_path: float = 0.0,
    alt_min: float | None = None,
    window: int = 0,
) -> tuple[FeatureTarget, EagleProposer]:
    """A FeatureTarget over model and a proposer reading it (fresh caches).

    Pass a ``prepare``d runner to share the draft's inference weights between
    sessions; an EagleDraft is prepared here (once per call). min_path,
    alt_min, window: see EagleProposer.
    """
    runner = prepare(draft, model, fused) if isinstance(draft, EagleDraft) else draft
    target = FeatureTarget(model, max_len)
    return target, EagleProposer(runner, target, name, min_path, alt_min, window)
