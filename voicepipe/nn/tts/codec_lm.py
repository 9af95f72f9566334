"""Codec LM: text (aligned phonemes) → MelVQ codec frames, one AR step per 46.4 ms frame.

Per frame t the input is
    code_emb(c0[t-1])                      the previous frame's level-0 code (BOS at t=0)
  + cond[t]                                aligned phonemes (nn/tts/phonemes.py):
        W [enc[idx_t], enc[idx_t+1..t+LA]] + prog_emb + dur_emb
where ``enc`` is a small bidirectional conv encoder over the utterance's phonemes.
A causal transformer (RoPE, KV cache) gives h[t]; head0(h[t]) predicts level 0.
Deeper RVQ levels come from a depth head: level q from h[t] + Σ_{l<q} emb_l(c_l[t]).

Why the AR state carries only level 0: level 0 holds most of the content
(docs/DESIGN.md §7: Q=1 already gives 7.6% WER), and it makes speculative decoding
clean — a draft proposes level-0 codes only, the target verifies them in one
pass, and the target's deeper levels for an accepted frame follow from its own
h[t] without invalidating later positions. The same ModelArgs with n_q=1 and a
tiny width is the draft.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from voicepipe.nn.tts.phonemes import LOOKAHEAD, N_DURBUCKET, N_PROGRESS


@dataclass
class ModelArgs:
    n_phon: int = 178
    codebook: int = 1024
    n_q: int = 4  # levels predicted (1 = level 0 only, e.g. the draft)
    dim: int = 320
    n_layers: int = 8
    n_heads: int = 5
    ffn_mult: int = 4
    enc_layers: int = 3
    max_frames: int = 1024
    rope_base: float = 10000.0

    @property
    def bos(self) -> int:
        return self.codebook

    @property
    def drop(self) -> int:  # "previous frame hidden" token (training-time frame dropout)
        return self.codebook + 1

    def to_dict(self) -> dict:
        return asdict(self)


class KVCache:
    """Preallocated (B, H, T_max, D) keys/values of one layer; rollback = overwrite from an
    earlier pos. Decoding state, not part of the model: every utterance (and session)
    has its own, so one loaded model serves them all."""

    def __init__(self, b: int, h: int, t_max: int, d: int, dtype: torch.dtype) -> None:
        self.k = torch.zeros(b, h, t_max, d, dtype=dtype)
        self.v = torch.zeros(b, h, t_max, d, dtype=dtype)

    def update(self, pos: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        s = k.shape[2]
        self.k[:, :, pos : pos + s] = k
        self.v[:, :, pos : pos + s] = v
        return self.k[:, :, : pos + s], self.v[:, :, : pos + s]


def cached_mask(pos: int, s: int) -> Tensor | None:
    """Attention mask of s new rows at positions pos… over a cache: every cached frame and
    the new rows causally (None for one row, which sees everything)."""
    if s <= 1:
        return None
    return torch.ones(s, pos + s, dtype=torch.bool).tril(pos)


def rope_table(args: ModelArgs) -> Tensor:
    hd = args.dim // args.n_heads
    inv = 1.0 / (args.rope_base ** (torch.arange(0, hd, 2).float() / hd))
    ang = torch.outer(torch.arange(args.max_frames).float(), inv)  # (T, hd/2)
    return torch.stack([ang.cos(), ang.sin()], dim=-1)  # (T, hd/2, 2)


def apply_rope(x: Tensor, rope: Tensor) -> Tensor:
    # x (B, H, S, hd), rope (S, hd/2, 2)
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    c, s = rope[..., 0], rope[..., 1]
    out = torch.stack([xs[..., 0] * c - xs[..., 1] * s, xs[..., 0] * s + xs[..., 1] * c], -1)
    return out.flatten(-2).type_as(x)


class Block(nn.Module):
    def __init__(self, a: ModelArgs) -> None:
        super().__init__()
        self.h, self.hd = a.n_heads, a.dim // a.n_heads
        self.n1, self.n2 = nn.LayerNorm(a.dim), nn.LayerNorm(a.dim)
        self.qkv = nn.Linear(a.dim, 3 * a.dim, bias=False)
        self.o = nn.Linear(a.dim, a.dim, bias=False)
        self.up = nn.Linear(a.dim, a.ffn_mult * a.dim)
        self.down = nn.Linear(a.ffn_mult * a.dim, a.dim)

    def forward(
        self,
        x: Tensor,
        rope: Tensor,
        pos: int | None,
        mask: Tensor | None,
        cache: KVCache | None = None,
    ) -> Tensor:
        y = self.attend(self.qkv_heads(x), rope, pos, mask, cache)
        return self.finish(x, y)

    # The pieces of ``forward``, so a batched pass (nn/tts/codec_lm_batch.py) can run the
    # matrices over every utterance's rows and attention per utterance, each in its cache.
    def qkv_heads(self, x: Tensor) -> Tensor:
        """x (B, S, d) → q, k, v stacked (3, B, H, S, hd), before rotation."""
        b, s, _ = x.shape
        return self.qkv(self.n1(x)).view(b, s, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)

    def attend(
        self,
        qkv: Tensor,
        rope: Tensor,
        pos: int | None,
        mask: Tensor | None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Rotated attention of qkv's rows (cached pass: positions pos…) → (B, H, S, hd)."""
        q, k, v = apply_rope(qkv[0], rope), apply_rope(qkv[1], rope), qkv[2]  # (B, H, S, hd)
        if pos is not None and cache is not None:
            k, v = cache.update(pos, k, v)  # (B, H, pos+S, hd)
        if mask is None and pos is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def finish(self, x: Tensor, y: Tensor) -> Tensor:
        """The residual output projection and feed-forward after attention y (B, H, S, hd)."""
        b, s, d = x.shape
        x = x + self.o(y.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.n2(x))))


class ConvBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.conv = nn.Conv1d(dim, dim, 5, padding=2)

    def forward(self, x: Tensor) -> Tensor:  # (B, P, d)
        return x + F.gelu(self.conv(self.norm(x).transpose(1, 2))).transpose(1, 2)


class DepthLevel(nn.Module):
    def __init__(self, a: ModelArgs) -> None:
        super().__init__()
        self.emb = nn.Embedding(a.codebook, a.dim)  # code of the level below
        self.norm = nn.LayerNorm(a.dim)
        self.up = nn.Linear(a.dim, 2 * a.dim)
        self.down = nn.Linear(2 * a.dim, a.dim)
        self.out_norm = nn.LayerNorm(a.dim)
        self.head = nn.Linear(a.dim, a.codebook, bias=False)

    def forward(self, z: Tensor) -> Tensor:
        z = z + self.down(F.gelu(self.up(self.norm(z))))
        return self.head(self.out_norm(z))


class CodecLM(nn.Module):
    rope: Tensor  # a buffer (register_buffer below), declared for the type checker

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = a = args
        self.ph_emb = nn.Embedding(a.n_phon, a.dim)
        self.enc = nn.ModuleList([ConvBlock(a.dim) for _ in range(a.enc_layers)])
        self.enc_norm = nn.LayerNorm(a.dim)
        self.cond_proj = nn.Linear((1 + LOOKAHEAD) * a.dim, a.dim)
        self.prog_emb = nn.Embedding(N_PROGRESS, a.dim)
        self.dur_emb = nn.Embedding(N_DURBUCKET, a.dim)
        self.code_emb = nn.Embedding(a.codebook + 2, a.dim)
        self.blocks = nn.ModuleList([Block(a) for _ in range(a.n_layers)])
        self.norm = nn.LayerNorm(a.dim)
        self.head0 = nn.Linear(a.dim, a.codebook, bias=False)
        self.depth = nn.ModuleList([DepthLevel(a) for _ in range(a.n_q - 1)])
        self.register_buffer("rope", rope_table(a), persistent=False)

    # -- conditioning ---------------------------------------------------------------------
    def condition(
        self, phon: Tensor, index: Tensor, ahead: Tensor, progress: Tensor, dur_bucket: Tensor
    ) -> Tensor:
        """phon (B, P); index/progress/dur_bucket (B, T); ahead (B, T, LA) → cond (B, T, d)."""
        e = self.ph_emb(phon)
        for blk in self.enc:
            e = blk(e)
        e = self.enc_norm(e)  # (B, P, d)
        idx = torch.cat([index.unsqueeze(-1), ahead], dim=-1)  # (B, T, 1+LA)
        b, t, n = idx.shape
        g = torch.gather(e, 1, idx.reshape(b, t * n, 1).expand(-1, -1, e.shape[-1]))
        g = g.reshape(b, t, n * e.shape[-1])
        return self.cond_proj(g) + self.prog_emb(progress) + self.dur_emb(dur_bucket)

    # -- trunk ----------------------------------------------------------------------------
    def forward(
        self,
        prev0: Tensor,
        cond: Tensor,
        pos: int | None = None,
        cache: list[KVCache] | None = None,
    ) -> Tensor:
        """prev0 (B, S) previous-frame level-0 codes, cond (B, S, d) → h (B, S, d).

        pos None: full causal pass (training). pos int with ``cache`` (from
        ``new_cache``): KV-cached pass writing positions pos … pos+S-1 (S = 1 for a
        plain AR step, K+1 to verify K drafts). The model itself holds no decoding state."""
        if pos is not None and cache is None:
            raise ValueError("a KV-cached pass (pos given) needs cache=model.new_cache(…)")
        x = self.code_emb(prev0) + cond
        s = x.shape[1]
        if pos is None:
            rope, mask = self.rope[:s], None
        else:
            rope, mask = self.rope[pos : pos + s], cached_mask(pos, s)
        for i, blk in enumerate(self.blocks):
            x = blk(x, rope, pos, mask, cache[i] if cache is not None else None)
        return self.norm(x)

    def _depth(self) -> list[DepthLevel]:
        """The depth levels, typed (nn.ModuleList types its items as Module)."""
        return cast("list[DepthLevel]", list(self.depth))

    def logits0(self, h: Tensor) -> Tensor:
        return self.head0(h)  # (B, S, V)

    def depth_logits(self, h: Tensor, codes: Tensor) -> Tensor:
        """Teacher-forced deeper levels: codes (B, S, ≥Q-1) levels 0..Q-2 → (B, S, Q-1, V)."""
        out, z = [], h
        for q, lvl in enumerate(self._depth()):
            z = z + lvl.emb(codes[..., q])
            out.append(lvl(z))
        return torch.stack(out, dim=-2)

    @torch.no_grad()
    def sample_deep(
        self, h: Tensor, c0: Tensor, temperature: float = 0.0, gen: torch.Generator | None = None
    ) -> Tensor:
        """h (N, d), c0 (N,) → (N, Q) codes, deeper levels greedy or sampled given level 0."""
        codes, z = [c0], h
        for lvl in self._depth():
            z = z + lvl.emb(codes[-1])
            logits = lvl(z)
            if temperature <= 0:
                codes.append(logits.argmax(-1))
            else:
                probs = torch.softmax(logits.float() / temperature, -1)
                codes.append(torch.multinomial(probs, 1, generator=gen).squeeze(-1))
        return torch.stack(codes, dim=-1)

    # -- inference state ------------------------------------------------------------------
    def new_cache(self, t_max: int, batch: int = 1) -> list[KVCache]:
        """Fresh per-utterance KV state (one KVCache per layer) for up to t_max frames."""
        a = self.args
        dtype = next(self.parameters()).dtype
        t_max = min(t_max, a.max_frames)
        return [KVCache(batch, a.n_heads, t_max, a.dim // a.n_heads, dtype) for _ in self.blocks]

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def lm_loss(
    model: CodecLM, phon: Tensor, al: dict[str, Tensor], prev0: Tensor, codes: Tensor, mask: Tensor
) -> tuple[Tensor, dict[str, float]]:
    """Masked cross-entropy over level 0 and (if any) the deeper levels; codes (B, T, Q)."""
    cond = model.condition(phon, al["index"], al["ahead"], al["progress"], al["dur_bucket"])
    h = model(prev0, cond)
    m = mask.float()
    denom = m.sum().clamp(min=1.0)
    ce0 = F.cross_entropy(model.logits0(h).transpose(1, 2), codes[..., 0], reduction="none")
    loss0 = (ce0 * m).sum() / denom
    stats = {"ce0": float(loss0.detach())}
    total = loss0
    if model.args.n_q > 1:
        dl = model.depth_logits(h, codes)  # (B, T, Q-1, V)
        ced = F.cross_entropy(
            dl.permute(0, 3, 1, 2), codes[..., 1 : model.args.n_q], reduction="none"
        )  # (B, T, Q-1)
        lossd = (ced * m.unsqueeze(-1)).sum() / (denom * (model.args.n_q - 1))
        stats["ce_deep"] = float(lossd.detach())
        total = total + lossd
    stats["loss"] = float(total.detach())
    return total, stats


def corrupt_prev(
    codes0: Tensor,
    args: ModelArgs,
    p_replace: float,
    p_drop: float,
    gen: torch.Generator | None = None,
) -> Tensor:
    """Shifted level-0 input with BOS, 30%-style random replacement and frame dropout (probe)."""
    b, t = codes0.shape
    prev = torch.cat([torch.full((b, 1), args.bos, dtype=codes0.dtype), codes0[:, :-1]], 1)
    r = torch.rand(b, t, generator=gen)
    rand_codes = torch.randint(0, args.codebook, (b, t), generator=gen, dtype=codes0.dtype)
    prev = torch.where(r < p_replace, rand_codes, prev)
    prev = torch.where(
        (r >= p_replace) & (r < p_replace + p_drop), torch.full_like(prev, args.drop), prev
    )
    prev[:, 0] = args.bos
    return prev


def describe(model: CodecLM) -> str:
    a = model.args
    return (
        f"CodecLM {model.n_params() / 1e6:.1f}M params: {a.n_layers}×d{a.dim} "
        f"heads {a.n_heads}, Q={a.n_q}, codebook {a.codebook}, lookahead {LOOKAHEAD}"
    )


def init_weights(model: CodecLM) -> None:
    for name, p in model.named_parameters():
        if p.dim() >= 2 and "emb" not in name:
            nn.init.normal_(p, std=0.02)
        if name.endswith(("o.weight", "down.weight")):
            nn.init.normal_(p, std=0.02 / math.sqrt(2 * model.args.n_layers))
