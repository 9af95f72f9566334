"""EAGLE-style draft: one decoder layer over the target's features (SmolLM2, Qwen2).

Why this shape (measured, see models/smollm2-draft/README.md): decode of the
135M target is memory- and overhead-bound, so a draft must cost a small
fraction of a target step. A stand-alone small LM with the tied 49,152-token
head would read 28M params per token (a fifth of the target); this draft
reads ~9M: an input projection, one llama decoder layer and a head over a
reduced vocabulary (the most frequent tokens of the target's own replies,
mapped back to full ids; a token outside it is simply never proposed). Its
input is the target's own last feature, so one layer suffices to predict
the next one (EAGLE, Li et al. 2024).

Step i: x_i = fc([f_i ; E[t_{i+1}]]) → decoder layer (RoPE, causal attention
over the draft's own KV cache) → RMSNorm → f̂_{i+1} ≈ the target's feature
at i+1; logits over the reduced vocabulary = f̂_{i+1} @ E[vocab]ᵀ, with E the
target's (frozen, tied) embedding. f are *post-norm* features (what the
target's head reads), so the draft's output lives in the same space.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import cast

import torch
import torch.nn as nn
import torch.nn.functional as F

from voicepipe.nn.llm.kv_cache import KVCache

FORMAT = "voicepipe-eagle-draft/1"


class DraftError(RuntimeError):
    pass


@dataclass(frozen=True)
class DraftArgs:
    dim: int = 576
    n_head: int = 9
    n_kv_head: int = 3
    head_dim: int = 64
    ffn_dim: int = 1536
    n_layer: int = 1
    rope_base: float = 100000.0
    norm_eps: float = 1e-5
    target_vocab: int = 49152
    # Q, K and V biases, as the target's layers have them (Qwen2 does, llama does not):
    # the draft starts from the target's last layer and keeps its shape.
    attn_bias: bool = False


class Block(nn.Module):
    def __init__(self, a: DraftArgs) -> None:
        super().__init__()
        self.a = a
        qkv = (a.n_head + 2 * a.n_kv_head) * a.head_dim
        self.attn_norm = nn.Parameter(torch.ones(a.dim))
        self.wqkv = nn.Linear(a.dim, qkv, bias=a.attn_bias)
        self.wo = nn.Linear(a.n_head * a.head_dim, a.dim, bias=False)
        self.ffn_norm = nn.Parameter(torch.ones(a.dim))
        self.w13 = nn.Linear(a.dim, 2 * a.ffn_dim, bias=False)
        self.w2 = nn.Linear(a.ffn_dim, a.dim, bias=False)

    def project(self, x: torch.Tensor, fc: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """q (B, H, T, D), k and v (B, Hkv, T, D) of x (B, T, dim), RoPE applied to q and k."""
        a = self.a
        B, T, _ = x.shape
        H, Hkv, D = a.n_head, a.n_kv_head, a.head_dim
        nqk = H + Hkv
        h = F.rms_norm(x, (a.dim,), self.attn_norm.to(x.dtype), a.norm_eps)
        qkv = self.wqkv(h.reshape(B * T, a.dim)).reshape(B, T, -1)  # (B, T, (H + 2Hkv)·D)
        qk = torch.view_as_complex(qkv[..., : nqk * D].float().reshape(B, T, nqk, D // 2, 2))
        qk = torch.view_as_real(qk * fc).reshape(B, T, nqk, D).to(x.dtype).transpose(1, 2)
        v = qkv[..., nqk * D :].reshape(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)
        return qk[:, :H], qk[:, H:], v

    def finish(self, x: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        """The residual stream after attention output o (B, H, T, D) and the MLP."""
        a = self.a
        B, T, _ = x.shape
        x = x + self.wo(o.transpose(1, 2).reshape(B * T, -1)).reshape(B, T, a.dim)
        h = F.rms_norm(x, (a.dim,), self.ffn_norm.to(x.dtype), a.norm_eps)
        gu = self.w13(h.reshape(B * T, a.dim))
        y = self.w2(F.silu(gu[:, : a.ffn_dim]) * gu[:, a.ffn_dim :])
        return x + y.reshape(B, T, a.dim)

    def forward(
        self,
        x: torch.Tensor,
        fc: torch.Tensor,
        cache: KVCache | None = None,
        layer: int = 0,
        pos: int = 0,
    ) -> torch.Tensor:
        """x (B, T, dim); fc (T, 1, D/2) rotations; with a cache B must be 1."""
        q, k, v = self.project(x, fc)
        T = x.shape[1]
        if cache is None:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            kc, vc = cache.update(layer, pos, k[0], v[0])  # (Hkv, pos+T, D)
            mask = None
            if T > 1:
                mask = torch.ones(T, pos + T, dtype=torch.bool).tril(pos)
            o = F.scaled_dot_product_attention(
                q, kc[None], vc[None], attn_mask=mask, enable_gqa=True
            )  # (1, H, T, D)
        return self.finish(x, o)


def unroll_mask(T: int, depth: int) -> torch.Tensor:
    """Which keys a depth-``depth`` row sees in ``EagleDraft.unroll``: (T, (depth + 1)·T).

    Keys are the rows of depth 0 (fed true features), then of depth 1, … depth.
    Row q of depth s drafts s tokens past the true row q - s, so, as in the
    draft's KV cache at inference, it sees the true rows up to q - s and the
    row of each depth r ≤ s on its own path, at q - (s - r).
    """
    q = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    blocks = [j <= q - depth] + [j == q - (depth - r) for r in range(1, depth + 1)]
    return torch.cat(blocks, dim=1)


class EagleDraft(nn.Module):
    """Predicts the target's next feature from its current feature and the next token."""

    def __init__(self, a: DraftArgs, vocab: torch.Tensor) -> None:
        super().__init__()
        self.args = a
        self.fc = nn.Linear(2 * a.dim, a.dim, bias=True)
        self.layers = nn.ModuleList([Block(a) for _ in range(a.n_layer)])
        self.norm = nn.Parameter(torch.ones(a.dim))
        # Reduced vocabulary: draft row j is full token id vocab[j].
        self.register_buffer("vocab", vocab.to(torch.long), persistent=True)
        inv = 1.0 / (a.rope_base ** (torch.arange(0, a.head_dim, 2).float() / a.head_dim))
        self._inv = inv
        self._table = torch.zeros(0, a.head_dim // 2, dtype=torch.complex64)

    def freqs(self, start: int, T: int) -> torch.Tensor:
        """Rotations (T, 1, D/2) for positions [start, start+T), from a table grown on demand."""
        end = start + T
        if end > self._table.shape[0]:  # decode calls this per draft token: build once
            n = max(end, 2 * self._table.shape[0], 1024)
            ang = torch.outer(torch.arange(n).float(), self._inv)
            self._table = torch.polar(torch.ones_like(ang), ang)
        return self._table[start:end, None]

    def forward(
        self,
        feats: torch.Tensor,
        next_emb: torch.Tensor,
        cache: KVCache | None = None,
        pos: int = 0,
        depths: int = 1,
    ) -> torch.Tensor:
        """feats, next_emb (B, T, dim) → predicted next features (B, T, dim).

        depths > 1 (training, no cache): ``unroll``'s (depths, B, T, dim). It is an
        argument here, not only a method, so a ``functional_call`` (QAT's rounded
        weights) reaches it.
        """
        if depths > 1:
            if cache is not None:
                raise ValueError("unrolled depths run without a cache")
            return self.unroll(feats, next_emb, depths)
        x = self._input(feats, next_emb)
        fc = self.freqs(pos, x.shape[1])
        for i, ly in enumerate(self.layers):
            x = ly(x, fc, cache, i, pos)
        if cache is not None:
            cache.advance(pos + x.shape[1])
        return self._out(x)

    def _input(self, feats: torch.Tensor, next_emb: torch.Tensor) -> torch.Tensor:
        """fc([feature ; next-token embedding]) per row: (B, T, dim)."""
        B, T, dim = feats.shape
        return self.fc(torch.cat([feats, next_emb], dim=-1).reshape(B * T, 2 * dim)).reshape(
            B, T, dim
        )

    def _out(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (self.args.dim,), self.norm.to(x.dtype), self.args.norm_eps)

    def unroll(self, feats: torch.Tensor, next_emb: torch.Tensor, depths: int) -> torch.Tensor:
        """Predictions (depths, B, T, dim) of every row drafted 1..depths tokens deep.

        Training-time test (EAGLE-3, Li et al. 2025): at inference only the first
        drafted token reads a true feature; the draft's next steps read its own
        predictions. Depth 0 is the teacher-forced forward. Row q of depth s
        reads depth s - 1's prediction at row q - 1 (detached) and the same next
        token as depth 0 (the drafted tokens before it were right, else its
        guess is never verified), and attends as ``unroll_mask`` says, exactly
        what the cached decode does (tested). Rows q < s have no such path; the
        caller masks them out.
        """
        fc = self.freqs(0, feats.shape[1])
        kv: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in self.layers]
        preds: list[torch.Tensor] = []
        f = feats
        for s in range(depths):
            if s:
                f = torch.cat([feats[:, :1], preds[-1][:, :-1].detach().to(feats.dtype)], dim=1)
            x = self._input(f, next_emb)
            mask = unroll_mask(feats.shape[1], s)
            # (cast: nn.ModuleList types its items as Module)
            for i, ly in enumerate(cast("list[Block]", self.layers)):
                q, k, v = ly.project(x, fc)
                kv[i].append((k, v))
                ks = torch.cat([a for a, _ in kv[i]], dim=2)
                vs = torch.cat([b for _, b in kv[i]], dim=2)
                o = F.scaled_dot_product_attention(q, ks, vs, attn_mask=mask, enable_gqa=True)
                x = ly.finish(x, o)
            preds.append(self._out(x))
        return torch.stack(preds)

    def new_cache(self, max_len: int, dtype: torch.dtype = torch.float32) -> KVCache:
        a = self.args
        return KVCache(a.n_layer, a.n_kv_head, max_len, a.head_dim, dtype)

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def for_inference(model: EagleDraft, weights: str = "int8") -> EagleDraft:
    """Swap the draft's linears for the engine's decode kernels (inference only).

    A draft step is a handful of one-row GEMVs: int8 weights (``qlinear``,
    the project's q8gemm kernel, fp32 activations) read a quarter of the fp32
    bytes. The layer keeps its forward; only the callables change.
    """
    from voicepipe.nn.llm.qlinear import Linear, act_dtype

    if weights == "fp32":
        return model
    dt = act_dtype(weights)

    def swap(owner: nn.Module, name: str) -> None:
        lin = getattr(owner, name)
        q = Linear(lin.weight.detach(), None if lin.bias is None else lin.bias.detach(), weights)
        fn = q.fn
        delattr(owner, name)
        setattr(owner, name, (lambda x: fn(x.to(dt)).float()) if dt != torch.float32 else fn)

    swap(model, "fc")
    for ly in model.layers:
        for name in ("wqkv", "wo", "w13", "w2"):
            swap(ly, name)
    return model.eval()


# --- reduced vocabulary -------------------------------------------------------


def reduced_vocab(counts: torch.Tensor, size: int, always: list[int] | None = None) -> torch.Tensor:
    """The ``size`` most frequent ids (counts (V,)), ``always`` included, ascending."""
    c = counts.clone().double()
    for t in always or []:
        c[t] = float("inf")
    # Unseen ids tie at 0; lower BPE ids (earlier merges, more common) win ties.
    order = torch.argsort(-c + torch.linspace(0, 1e-6, c.numel(), dtype=torch.double))
    return torch.sort(order[:size]).values


def to_reduced(vocab: torch.Tensor, n_full: int) -> torch.Tensor:
    """Map full ids → draft rows; -1 where a full id is not in the reduced vocabulary."""
    m = torch.full((n_full,), -1, dtype=torch.long)
    m[vocab] = torch.arange(vocab.numel())
    return m


# --- checkpoints --------------------------------------------------------------


def save(model: EagleDraft, path: str | Path, meta: dict | None = None) -> None:
    state = {k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    torch.save(
        {"format": FORMAT, "args": asdict(model.args), "state": state, "meta": meta or {}}, path
    )


def load(path: str | Path) -> tuple[EagleDraft, dict]:
    """Load a checkpoint (fp32 weights); DraftError names the file and the fix."""
    path = Path(path)
    fix = "run `voicepipe models pull smollm2-draft` (or retrain: voicepipe train draft)"
    if not path.is_file():
        raise DraftError(f"draft checkpoint not found: {path}; {fix}")
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise DraftError(f"{path}: not a readable draft checkpoint ({e}); {fix}") from e
    if not isinstance(ck, dict) or ck.get("format") != FORMAT:
        got = ck.get("format") if isinstance(ck, dict) else type(ck).__name__
        raise DraftError(f"{path}: not a {FORMAT} checkpoint (format {got!r}); {fix}")
    try:
        args = DraftArgs(**ck["args"])
        model = EagleDraft(args, ck["state"]["vocab"])
        model.load_state_dict(
            {k: v.float() if v.is_floating_point() else v for k, v in ck["state"].items()}
        )
    except (KeyError, TypeError, RuntimeError) as e:
        raise DraftError(f"{path}: checkpoint does not match the draft model ({e}); {fix}") from e
    return model.eval(), ck.get("meta", {})
