"""A lean llama / qwen2 decoder for CPU inference, gpt-fast style.

Weights come from a GGUF file (``voicepipe.nn.llm.gguf``) and run in one of the
formats of ``voicepipe.nn.llm.qlinear``. Batch size is 1: a voice assistant
serves one reply per session at a time, and decode is memory-bound anyway.

Module-level entry points:
- ``prefill(model, cache, tokens)``      → logits of the last prompt token
- ``decode_step(model, cache, token)``   → logits of the next token
- ``verify(model, cache, tokens)``       → logits of every fed position (K+1)
Rejected speculative positions are removed with ``cache.rollback(n)``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

from voicepipe.nn.llm import fused, packed
from voicepipe.nn.llm.gguf import GGUFModel, ModelArgs
from voicepipe.nn.llm.gguf import load as load_gguf
from voicepipe.nn.llm.kv_cache import CacheFull, KVCache
from voicepipe.nn.llm.qlinear import Linear, act_dtype

LINEARS = ("wqkv", "wo", "w13", "w2")  # a Layer's matrices


@dataclass
class Layer:
    attn_norm: torch.Tensor  # (dim,)
    wqkv: Linear  # dim → (H + 2·Hkv)·D, Q and K rows in interleaved-RoPE order
    wo: Linear  # H·D → dim
    ffn_norm: torch.Tensor  # (dim,)
    w13: Linear  # dim → 2·ffn (gate ‖ up)
    w2: Linear  # ffn → dim


class Transformer:
    def __init__(
        self,
        g: GGUFModel,
        weights: str = "fp32",
        max_len: int = 4096,
        kernels: bool = True,
        threads: int = 1,
        progress: Callable[[int, int], None] | None = None,
        fused: bool = True,
    ) -> None:
        """Dequantize g's tensors and pack them into ``weights``' format (progress(i, n)
        after each of the n layers: a 1.5B model takes about a minute here). fused=False:
        leave the fused step unbuilt (see ``load``)."""
        a = g.args
        self._setup(a, g.metadata, weights, max_len, kernels)
        t = g.tensors
        emb = t["token_embd.weight"]  # (V, dim) fp32
        self.embed = emb.to(self.dtype)
        self.layers: list[Layer] = []
        for i in range(a.n_layer):
            p = f"blk.{i}."
            wqkv = torch.cat(
                [t[p + "attn_q.weight"], t[p + "attn_k.weight"], t[p + "attn_v.weight"]]
            )
            bqkv = None
            if a.attn_bias:
                bqkv = torch.cat([t[p + "attn_q.bias"], t[p + "attn_k.bias"], t[p + "attn_v.bias"]])
            w13 = torch.cat([t[p + "ffn_gate.weight"], t[p + "ffn_up.weight"]])
            self.layers.append(
                Layer(
                    attn_norm=t[p + "attn_norm.weight"].to(self.dtype),
                    wqkv=Linear(wqkv, bqkv, weights, kernels),
                    wo=Linear(t[p + "attn_output.weight"], None, weights, kernels),
                    ffn_norm=t[p + "ffn_norm.weight"].to(self.dtype),
                    w13=Linear(w13, None, weights, kernels),
                    w2=Linear(t[p + "ffn_down.weight"], None, weights, kernels),
                )
            )
            if progress is not None:
                progress(i + 1, a.n_layer)
        self.norm = t["output_norm.weight"].to(self.dtype)
        head = emb if a.tied_embeddings else t["output.weight"]
        self.output = Linear(head, None, weights, kernels)  # dim → V
        self._finish(kernels, threads, fused)

    def _setup(
        self, a: ModelArgs, metadata: dict, weights: str, max_len: int, kernels: bool
    ) -> None:
        self.args: ModelArgs = a
        self.weights = weights
        self.dtype = act_dtype(weights, kernels)
        self.kernel = "q8gemm" if weights == "int8" and self.dtype == torch.float32 else "aten"
        self.max_len = min(max_len, a.context_length)
        self.metadata = metadata

    def _finish(self, kernels: bool, threads: int, fused_step: bool = True) -> None:
        a = self.args
        # Interleaved RoPE as complex rotations: (Tmax, D/2) complex64.
        inv = 1.0 / (a.rope_base ** (torch.arange(0, a.head_dim, 2).float() / a.head_dim))
        ang = torch.outer(torch.arange(self.max_len).float(), inv)
        self.freqs = torch.polar(torch.ones_like(ang), ang)
        # One C++ call per step instead of ~20 ops per layer (kernels/llama_step);
        # forward() below stays the reference and the path for other formats.
        self.fused = fused.build_for(self) if kernels and fused_step else None
        if self.fused is not None:
            self.kernel = "llama_step"
            self.fused.threads = threads  # 1 by default: see kernels/llama_step (threads_)

    # ------------------------------------------------------------ packed state

    def _linears(self) -> dict[str, Linear]:
        out = {"output": self.output}
        for i, ly in enumerate(self.layers):
            for k in LINEARS:
                out[f"layers.{i}.{k}"] = getattr(ly, k)
        return out

    def packed_state(self) -> tuple[dict[str, torch.Tensor], dict[str, list[int]]]:
        """Every tensor the model runs on, by name, and each Linear's (out, in): what
        ``from_packed`` needs to rebuild the model without the GGUF file."""
        st = {"embed": self.embed, "norm": self.norm}
        for i, ly in enumerate(self.layers):
            st[f"layers.{i}.attn_norm"] = ly.attn_norm
            st[f"layers.{i}.ffn_norm"] = ly.ffn_norm
        shapes = {}
        for name, lin in self._linears().items():
            shapes[name] = [lin.out_features, lin.in_features]
            st.update({f"{name}.{k}": v for k, v in lin.state().items()})
        return st, shapes

    @classmethod
    def from_packed(
        cls,
        args: ModelArgs,
        metadata: dict,
        state: dict[str, torch.Tensor],
        shapes: dict[str, list[int]],
        weights: str,
        max_len: int = 4096,
        kernels: bool = True,
        threads: int = 1,
        fused: bool = True,
    ) -> Transformer:
        """The model ``packed_state`` was taken from (its tensors used as given, e.g.
        memory-mapped). KeyError if a tensor is missing."""
        self = cls.__new__(cls)
        self._setup(args, metadata, weights, max_len, kernels)

        def lin(name: str) -> Linear:
            pre = name + "."
            sub = {k[len(pre) :]: v for k, v in state.items() if k.startswith(pre)}
            if not sub:
                raise KeyError(name)
            out, inp = shapes[name]
            return Linear.from_state(sub, (out, inp), weights, kernels)

        self.embed = state["embed"]
        self.norm = state["norm"]
        self.layers = [
            Layer(
                attn_norm=state[f"layers.{i}.attn_norm"],
                ffn_norm=state[f"layers.{i}.ffn_norm"],
                **{k: lin(f"layers.{i}.{k}") for k in LINEARS},
            )
            for i in range(args.n_layer)
        ]
        self.output = lin("output")
        self._finish(kernels, threads, fused)
        return self

    def new_cache(self, max_len: int | None = None) -> KVCache:
        a = self.args
        n = min(max_len or self.max_len, self.max_len)
        return KVCache(a.n_layer, a.n_kv_head, n, a.head_dim, self.dtype)

    @property
    def n_params(self) -> int:
        a = self.args
        per = a.dim * (a.n_head + 2 * a.n_kv_head) * a.head_dim
        per += a.n_head * a.head_dim * a.dim + 3 * a.dim * a.ffn_dim
        head = 0 if a.tied_embeddings else a.vocab_size * a.dim
        return a.n_layer * per + a.vocab_size * a.dim + head


def load(
    path: str | Path,
    weights: str = "fp32",
    max_len: int = 4096,
    kernels: bool = True,
    threads: int = 1,
    packed_cache: bool = True,
    fused: bool = True,
) -> tuple[Transformer, float]:
    """Load a GGUF model; returns (model, seconds taken).

    kernels=False: aten kernels only. threads: of the fused step (the per-op
    path follows torch.set_num_threads). packed_cache: the packed weights come
    from (and after a first load go to) the on-disk cache (``voicepipe.nn.llm.packed``).
    fused=False: the weights are packed (in the fused step's layout where it builds)
    but the step itself is not built nor waited for: set-up packs the weights while
    the step compiles (``models pack``); such a model runs on the per-op path.
    """
    t0 = time.perf_counter()
    path = Path(path)
    cpath = None
    if packed_cache and weights in packed.PACKED_FORMATS and packed.enabled() and path.is_file():
        cpath = packed.cache_path(path, weights, kernels)
        try:
            build = partial(Transformer.from_packed, weights=weights, max_len=max_len,
                            kernels=kernels, threads=threads, fused=fused)  # fmt: skip
            model = packed.load(cpath, weights, build)
        except packed.PackedCacheError as e:
            print(f"voicepipe: packed weights {cpath} unusable ({e}); rebuilding them",
                  file=sys.stderr, flush=True)  # fmt: skip
            cpath.unlink(missing_ok=True)
            model = None
        if model is not None:
            return model, time.perf_counter() - t0
    g = load_gguf(path)
    prog = packed.Progress(f"{path.name} into {weights}") if cpath is not None else None
    model = Transformer(g, weights, max_len, kernels, threads, progress=prog, fused=fused)
    if cpath is not None and prog is not None:
        try:
            packed.save(cpath, model)
            prog.note(f"packed weights cached in {cpath} (later loads map them)")
        except OSError as e:  # a full or read-only disk: run without the cache
            prog.note(f"packed weights not cached ({e})")
    return model, time.perf_counter() - t0


def _attend_rows(
    q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, pos: int, scale: float
) -> torch.Tensor:
    """Causal attention one query row at a time: q (H, T, D), kc/vc (Hkv, L, D) → (H, T, D).

    Row j sees keys [0, pos+j] and is computed with the same ops and shapes
    whatever T is, so verify() rows equal decode_step() bit for bit. For one
    query, three small ops beat the flash-attention kernel's set-up cost.
    """
    H, T, D = q.shape
    hkv = kc.shape[0]
    qg = (q * scale).reshape(hkv, H // hkv, T, D)  # query head h uses kv head h // G
    rows = []
    for j in range(T):
        n = pos + j + 1
        s = torch.matmul(qg[:, :, j], kc[:, :n].transpose(1, 2))  # (Hkv, G, n)
        rows.append(torch.matmul(torch.softmax(s, dim=-1), vc[:, :n]))  # (Hkv, G, D)
    o = rows[0].unsqueeze(2) if T == 1 else torch.stack(rows, dim=2)  # (Hkv, G, T, D)
    return o.reshape(H, T, D)


@torch.inference_mode()
def forward(
    m: Transformer,
    cache: KVCache,
    tokens: torch.Tensor,
    pos: int,
    last_only: bool = False,
    rowwise: bool = False,
    feats: torch.Tensor | None = None,
    parents: list[int] | None = None,
    best: torch.Tensor | None = None,
    threads: int = 0,
) -> torch.Tensor:
    """Feed tokens (T,) at positions [pos, pos+T); returns fp32 logits (T, V) or (1, V).

    rowwise: attend one query row at a time, so every row is bit-identical to a
    one-token decode at its position (CPU attention kernels are not batch-invariant).
    feats: a (max_len, dim) fp32 buffer whose rows [pos, pos+T) receive the fed
    rows' last hidden states after the final norm (what the head reads), e.g.
    for an EAGLE-style draft.
    parents: the rows form a tree (row t follows row parents[t], -1 for row 0):
    row t stays in cache slot pos + t, is scored at position pos + its depth on
    its own path only (fused kernel, with feats; ``ModelTarget.move`` then places
    an accepted row).
    best: an int64 tensor, one entry per logits row, receiving each row's argmax
    (the fused kernel finds it while the head runs, before the logits leave
    the cache).
    threads: the fused kernel's threads for this call (0: the model's own setting).
    """
    T = tokens.shape[0]
    if parents is not None and (m.fused is None or feats is None):
        raise ValueError("a tree of rows needs the fused kernel and a feature buffer")
    if m.fused is not None:  # always row-wise, so every row is bit-identical to a decode step
        if pos + T > cache.max_len:
            raise CacheFull(f"KV cache full: {pos + T} > {cache.max_len} positions")
        t = tokens.contiguous()
        if feats is None:
            logits = m.fused.forward(t, cache.kv, pos, last_only, best, threads)
        else:  # the kernel writes the normed rows itself: no tensor, norm or copy here
            logits = m.fused.forward_into(
                t, cache.kv, pos, last_only, feats, parents or [], best, threads
            )
        cache.advance(pos + T)
        return logits
    a = m.args
    H, Hkv, D, dim = a.n_head, a.n_kv_head, a.head_dim, a.dim
    nqk = H + Hkv
    end = pos + T
    eps = a.norm_eps
    dt = m.dtype
    fc = m.freqs[pos:end, None]  # (T, 1, D/2)
    scale = D**-0.5
    mask = None
    if T > 1 and not rowwise:  # new rows see the whole cache and the new tokens up to themselves
        mask = torch.ones(T, end, dtype=torch.bool).tril(pos)  # (T, L)
    x = m.embed[tokens]  # (T, dim)
    for i, ly in enumerate(m.layers):
        h = F.rms_norm(x, (dim,), ly.attn_norm, eps)
        qkv = ly.wqkv.fn(h)  # (T, (H + 2Hkv)·D)
        qk = torch.view_as_complex(qkv[:, : nqk * D].float().reshape(T, nqk, D // 2, 2))
        qk = torch.view_as_real(qk * fc).reshape(T, nqk, D).to(dt).transpose(0, 1)  # (H+Hkv, T, D)
        v = qkv[:, nqk * D :].reshape(T, Hkv, D).transpose(0, 1)  # (Hkv, T, D)
        kc, vc = cache.update(i, pos, qk[H:], v)  # (Hkv, L, D)
        if rowwise:  # each row exactly as decode_step computes it (see verify)
            o = _attend_rows(qk[:H], kc, vc, pos, scale)[None]  # (1, H, T, D)
        else:
            o = F.scaled_dot_product_attention(
                qk[None, :H], kc[None], vc[None], attn_mask=mask, enable_gqa=True
            )  # (1, H, T, D)
        x = x + ly.wo.fn(o[0].transpose(0, 1).reshape(T, H * D))
        h = F.rms_norm(x, (dim,), ly.ffn_norm, eps)
        gu = ly.w13.fn(h)  # (T, 2·ffn)
        f = a.ffn_dim
        x = x + ly.w2.fn(F.silu(gu[:, :f]) * gu[:, f:])
    cache.advance(end)
    if feats is not None:  # every row normed, as the head reads them
        x = F.rms_norm(x, (dim,), m.norm, eps)
        feats[pos:end] = x.float()
        logits = m.output.fn(x[-1:] if last_only else x).float()
    else:
        x = F.rms_norm(x[-1:] if last_only else x, (dim,), m.norm, eps)
        logits = m.output.fn(x).float()  # (T, V)
    if best is not None:
        best.copy_(logits.argmax(-1))
    return logits


def prefill(
    m: Transformer,
    cache: KVCache,
    tokens: list[int] | torch.Tensor,
    feats: torch.Tensor | None = None,
    threads: int = 0,
    rowwise: bool = False,
) -> torch.Tensor:
    """Feed a prompt after whatever the cache holds; logits (V,) of its last token
    (threads: the fused kernel's for this pass, 0: the model's own; rowwise: see forward,
    the fused kernel always is)."""
    t = torch.as_tensor(tokens, dtype=torch.long)
    return forward(
        m, cache, t, cache.length, last_only=True, rowwise=rowwise, feats=feats, threads=threads
    )[0]


def decode_step(m: Transformer, cache: KVCache, token: int) -> torch.Tensor:
    """Feed one token; logits (V,) for the next."""
    return forward(m, cache, torch.tensor([token]), cache.length, rowwise=True)[0]


def verify(
    m: Transformer,
    cache: KVCache,
    tokens: list[int] | torch.Tensor,
    feats: torch.Tensor | None = None,
    parents: list[int] | None = None,
    best: torch.Tensor | None = None,
    threads: int = 0,
) -> torch.Tensor:
    """Feed K+1 tokens (last accepted + K drafts) in one pass; logits (K+1, V) (and
    their argmax rows into best, see forward; threads: the fused kernel's, 0: the
    model's own).

    Row i scores the token after tokens[i]. Roll back with cache.rollback().
    With batch-invariant linear kernels (int8 / int4) every row is bit-identical
    to ``decode_step``, so greedy speculation is token-identical to greedy decoding.
    """
    t = torch.as_tensor(tokens, dtype=torch.long)
    return forward(
        m, cache, t, cache.length, rowwise=True, feats=feats, parents=parents, best=best,
        threads=threads,
    )  # fmt: skip
