"""Self-distillation data for the draft: the target's own greedy replies and features.

The engine decodes one sequence at a time (batch 1 is right for serving), but
data generation wants throughput: bf16 GEMMs on this CPU run ~200 G MAC/s at
64 rows against ~6 at one row. So this module runs the same ``llama.Transformer``
weights (its ``Linear`` closures) over a left-padded batch with its own batched
KV cache, and records at every position the target's final feature (the
normed last hidden state that the LM head reads), which is what the EAGLE-style
draft learns to predict.

One sample = {"tokens": (n,) int32 prompt + reply (ending with the stop token
when the reply ended), "prompt_len": int, "feats": (n-1, dim) fp16} where
feats[i] is the target's feature at position i (its logits score tokens[i+1]).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from voicepipe.nn.llm import llama
from voicepipe.speculative.sampling import SamplingParams, draw, probs


@torch.inference_mode()
def _forward(
    m: llama.Transformer,
    kv: torch.Tensor,
    tokens: torch.Tensor,
    pos: torch.Tensor,
    slot: int,
    keep: torch.Tensor,
) -> torch.Tensor:
    """Feed tokens (B, T) into cache slots [slot, slot+T); returns features (B, T, dim).

    pos (B, T): RoPE positions (a row's left padding does not count);
    keep (B, slot+T): which cache slots hold real tokens.
    kv: (n_layer, 2, B, Hkv, L, D).
    """
    a = m.args
    B, T = tokens.shape
    H, Hkv, D, dim = a.n_head, a.n_kv_head, a.head_dim, a.dim
    nqk = H + Hkv
    end = slot + T
    causal = torch.ones(T, end, dtype=torch.bool).tril(slot)  # (T, L)
    mask = causal[None] & keep[:, None, :end]  # (B, T, L)
    mask = mask | _diag(T, end, slot)
    fc = m.freqs[pos][:, :, None]  # (B, T, 1, D/2)
    x = m.embed[tokens]  # (B, T, dim)
    for i, ly in enumerate(m.layers):
        h = F.rms_norm(x, (dim,), ly.attn_norm, a.norm_eps)
        qkv = ly.wqkv.fn(h.reshape(B * T, dim)).reshape(B, T, -1)
        qk = torch.view_as_complex(qkv[..., : nqk * D].float().reshape(B, T, nqk, D // 2, 2))
        qk = torch.view_as_real(qk * fc).reshape(B, T, nqk, D).to(m.dtype).transpose(1, 2)
        v = qkv[..., nqk * D :].reshape(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)
        kv[i, 0, :, :, slot:end] = qk[:, H:]
        kv[i, 1, :, :, slot:end] = v
        o = F.scaled_dot_product_attention(
            qk[:, :H],
            kv[i, 0, :, :, :end],
            kv[i, 1, :, :, :end],
            attn_mask=mask[:, None],
            enable_gqa=True,
        )  # (B, H, T, D)
        x = x + ly.wo.fn(o.transpose(1, 2).reshape(B * T, H * D)).reshape(B, T, dim)
        h = F.rms_norm(x, (dim,), ly.ffn_norm, a.norm_eps)
        gu = ly.w13.fn(h.reshape(B * T, dim))
        f = a.ffn_dim
        x = x + ly.w2.fn(F.silu(gu[:, :f]) * gu[:, f:]).reshape(B, T, dim)
    return F.rms_norm(x, (dim,), m.norm, a.norm_eps)  # (B, T, dim)


def _diag(T: int, L: int, slot: int) -> torch.Tensor:
    """Each query sees its own slot, so padding rows never attend to nothing (NaN)."""
    d = torch.zeros(T, L, dtype=torch.bool)
    d[torch.arange(T), slot + torch.arange(T)] = True
    return d[None]


@torch.inference_mode()
def generate_batch(
    m: llama.Transformer, prompts: list[list[int]], max_new: int, stop_ids: set[int]
) -> list[dict]:
    """Greedy replies to a batch of prompts, with the target's feature at every position."""
    B = len(prompts)
    P = max(len(p) for p in prompts)
    L = P + max_new
    a = m.args
    pad = [P - len(p) for p in prompts]
    tokens = torch.zeros(B, P, dtype=torch.long)
    keep = torch.zeros(B, L, dtype=torch.bool)
    for b, p in enumerate(prompts):
        tokens[b, pad[b] :] = torch.tensor(p)
        keep[b, pad[b] : P] = True
    pos = (torch.arange(P)[None] - torch.tensor(pad)[:, None]).clamp(min=0)
    kv = torch.zeros(a.n_layer, 2, B, a.n_kv_head, L, a.head_dim, dtype=m.dtype)
    feats = [_forward(m, kv, tokens, pos, 0, keep)]  # (B, P, dim)
    cur = m.output.fn(feats[0][:, -1]).float().argmax(-1)  # (B,)
    out = [cur]
    done = torch.tensor([int(t) in stop_ids for t in cur])
    lens = torch.tensor([len(p) for p in prompts])
    for step in range(1, max_new):
        if bool(done.all()):
            break
        slot = P + step - 1
        keep[:, slot] = ~done
        f = _forward(m, kv, cur[:, None], (lens + step - 1)[:, None], slot, keep)  # (B, 1, dim)
        feats.append(f)
        cur = m.output.fn(f[:, 0]).float().argmax(-1)
        out.append(cur)
        done |= torch.tensor([int(t) in stop_ids for t in cur])
    allf = torch.cat(feats, dim=1)  # (B, P + steps - 1, dim)
    gen = torch.stack(out, dim=1)  # (B, steps)
    samples = []
    for b, p in enumerate(prompts):
        reply = gen[b].tolist()
        for i, t in enumerate(reply):
            if t in stop_ids:
                reply = reply[: i + 1]
                break
        n = len(p) + len(reply)
        fb = allf[b, pad[b] : pad[b] + n - 1]  # positions 0..n-2
        samples.append(
            {
                "tokens": torch.tensor(p + reply, dtype=torch.int32),
                "prompt_len": len(p),
                "feats": fb.to(torch.float16).clone(),
            }
        )
    return samples


@torch.inference_mode()
def generate_one(
    m: llama.Transformer,
    prompt: list[int],
    max_new: int,
    stop_ids: set[int],
    temperature: float = 0.0,
    seed: int = 0,
) -> dict:
    """One reply with its features, on the engine's own forward (fused when built).

    The serving target is the fused int4 step (int8 activations): its features
    differ slightly from a bf16 batch's, and the draft reads exactly these at
    inference. Batch 1, but the fused step decodes ~3-5x faster than the
    batched per-op bf16 path did on this CPU.

    temperature > 0 samples the reply (seeded): other continuations of the same
    prompts, for more training contexts. The labels stay right, because the
    draft learns the target's distribution at each position from the target's
    feature there, whichever token was drawn.
    """
    sp = SamplingParams(temperature=temperature)  # the draws come from rng below
    rng = np.random.default_rng(seed)
    cache = m.new_cache(len(prompt) + max_new + 1)
    feats = torch.zeros(cache.max_len, m.args.dim)  # row i: position i's normed state
    logits = llama.prefill(m, cache, prompt, feats)
    reply: list[int] = []
    for _ in range(max_new):
        t = int(logits.argmax()) if sp.greedy else draw(probs(logits.numpy(), sp), rng.random())
        reply.append(t)
        if t in stop_ids or len(reply) == max_new:
            break
        logits = llama.forward(m, cache, torch.tensor([t]), cache.length, feats=feats)[0]
    n = len(prompt) + len(reply) - 1  # positions 0..n-1 were fed
    return {
        "tokens": torch.tensor(prompt + reply, dtype=torch.int32),
        "prompt_len": len(prompt),
        "feats": feats[:n].to(torch.float16).clone(),
    }
