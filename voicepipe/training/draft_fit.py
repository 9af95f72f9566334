"""Fit stage of `voicepipe train draft`: teacher-forced EAGLE training on gen shards.

For a sample with tokens t (n,) and target features f (n-1, dim), draft input
i = (f_i, E[t_{i+1}]) predicts f_{i+1} and, through the frozen head over the
reduced vocabulary, the target's distribution of t_{i+2}. Loss on reply
positions only: KL(target ‖ draft) over the reduced vocabulary (what decides
acceptance) + smooth-L1 on the feature (what keeps multi-step drafting on
track, as in EAGLE).

Robustness to drafting from its own predictions (steps 2..K at inference):
noise on the input features, and with --depths N > 1 training-time test
(EAGLE-3): every row is also drafted 2..N tokens deep, each depth fed the
one before's predictions and attending exactly as the cached decode does
(``EagleDraft.unroll``); the k-th drafted token's loss is weighted
w^(k-1), w = --depth-weight; N times the cost per step. (An earlier
--self-feed, a causal pass over a half-and-half mix of true and predicted
features, attended to predicted rows the decode never sees and gained
nothing; it is gone.)

Quantization in the loop (--qat): the layer's matrices go through int4
(Q4_1) rounding and fc through int8 rounding in every forward, straight-through
in the backward (``nn.fake_quant``), the formats the fused draft runs in, so
the weights settle where the rounded ones predict well; ``evaluate`` then
measures the rounded draft too.

Data mix (--recent-from N --recent-share P): shards from index N on (e.g.
the replies of the current serving target, int4 fused, when the older shards
came from a bf16 target) fill a share P of every batch, the rest is drawn
from the older shards; the default (P = 0) samples all shards alike.
--more-data adds other gen dirs (e.g. replies sampled at a temperature) to
the recent pool, without the replies to the held-out shards' prompts.

Resumable: runs/draft/last.pt (model + optimizer + step); best.pt is kept
by held-out first-guess agreement on the --val-shard shards (the engine
drafts past the first guess only when the draft is sure, so the first guess
decides most passes: training-time test raised the deeper ones and gained nothing,
see models/smollm2-draft/README.md);
log.jsonl has one line per logging interval (``evaluate``: agreement 1, 2
and 3 tokens deep). New gen shards are picked up while training runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from voicepipe.training.draft_features import trim
from voicepipe.training.draft_ffn import ffn_channels, widen_ffn


def _shards(data: Path) -> list[Path]:
    return sorted(data.glob("gen_*.pt"))


def _index(path: Path) -> int:
    return int(path.stem.split("_")[1])


def _load_samples(paths: list[Path], ctx: int = 0) -> list[dict]:
    """The shards' samples; ctx > 0 keeps only the last ctx prompt tokens of each."""
    out: list[dict] = []
    for p in paths:
        out += [trim(x, ctx) for x in torch.load(p, map_location="cpu", weights_only=True)]
    return out


def _load_more(paths: list[Path], held_prompts: set[int], ctx: int = 0) -> list[dict]:
    """Samples of extra gen dirs, minus replies to the held-out prompts."""
    return [x for x in _load_samples(paths, ctx) if int(x["prompt_index"]) not in held_prompts]


def _counts(samples: list[dict], V: int) -> torch.Tensor:
    c = torch.zeros(V, dtype=torch.long)
    for s in samples:
        r = s["tokens"][s["prompt_len"] :].long()
        c += torch.bincount(r, minlength=V)
    return c


def _batch(samples: list[dict], emb: torch.Tensor, max_len: int) -> tuple[torch.Tensor, ...]:
    """Padded (B, T) training rows: feats_in, next_emb, feats_out, target ids, mask."""
    T = min(max_len, max(len(s["tokens"]) - 2 for s in samples))
    B, dim = len(samples), emb.shape[1]
    fin = torch.zeros(B, T, dim)
    fout = torch.zeros(B, T, dim)
    nxt = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b, s in enumerate(samples):
        t, f, pl = s["tokens"].long(), s["feats"].float(), s["prompt_len"]
        n = len(t)
        m = min(T, n - 2)  # inputs i = 0..n-3
        # Long samples: a random window that ends inside the reply.
        start = 0 if n - 2 <= T else random.randint(0, n - 2 - T)
        idx = torch.arange(start, start + m)
        fin[b, :m] = f[idx]
        fout[b, :m] = f[idx + 1]
        nxt[b, :m] = t[idx + 1]
        mask[b, :m] = (idx + 2) >= pl
    return fin, emb[nxt].float(), fout, mask


def pick(old: list, recent: list, bs: int, share: float) -> list:
    """One batch: each sequence from ``recent`` with probability ``share``, else from ``old``.

    share = 0 (or either list empty) samples the union uniformly, without replacement.
    """
    if share <= 0 or not recent or not old:
        pool = old + recent
        return random.sample(pool, min(bs, len(pool)))
    n_recent = min(sum(random.random() < share for _ in range(bs)), len(recent))
    return random.sample(recent, n_recent) + random.sample(old, min(bs - n_recent, len(old)))


def by_length(pool: list[dict], bs: int) -> list[list[dict]]:
    """``pool`` (a few batches' worth of random samples) as batches of ``bs`` samples of
    similar length, in random order. A batch is padded to its longest sample: drawn at
    random, half of its rows were padding (replies of 7 to 160 tokens); a pool of 8
    batches sorted by length leaves ~17 %. Which samples train is unchanged."""
    ordered = sorted(pool, key=lambda x: len(x["tokens"]))
    batches = [ordered[i : i + bs] for i in range(0, len(ordered), bs)]
    random.shuffle(batches)
    return batches


POOL = 8  # batches drawn at once and regrouped by length (by_length)


def bf16_autocast() -> contextlib.AbstractContextManager:
    """bf16 autocast where the CPU multiplies bf16 natively (AVX512-BF16 or AMX), else none:
    on an AVX2-only Zen 3 a training step of the 1.5B's draft took 50 s under bf16 autocast
    against 2.3 s in fp32 (8 rows of 80, one thread)."""
    cpu = torch.cpu
    if cpu._is_avx512_bf16_supported() or cpu._is_amx_tile_supported():
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def fit(args: argparse.Namespace) -> int:
    from voicepipe.nn.llm import llama
    from voicepipe.nn.llm.draft_model import DraftArgs, EagleDraft, reduced_vocab, save
    from voicepipe.nn.llm.engine import gguf_path
    from voicepipe.nn.llm.tokenizer import ChatTokenizer
    from voicepipe.training.draft_paths import data_dir, run_dir

    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    data, run = data_dir(args.data), run_dir(args.run)
    run.mkdir(parents=True, exist_ok=True)
    target, _ = llama.load(gguf_path(args.model), "bf16", max_len=256)
    ta = target.args
    emb = target.embed.float()  # (V, dim) frozen, tied input/output embedding
    tok = ChatTokenizer(target.metadata)
    paths = _shards(data)
    if len(paths) < 2:
        raise SystemExit(f"need at least 2 gen shards in {data} (run --stage gen first)")
    # The held-out shards: the first by default; --val-shard picks others (e.g. shards
    # generated by the current target when fine-tuning on its replies), by index.
    want = {int(x) for x in str(args.val_shard).split(",")}
    heldout = [p for p in paths if _index(p) in want]
    if len(heldout) != len(want):
        raise SystemExit(f"--val-shard {args.val_shard}: no such shard in {data}")
    train_paths = [p for p in paths if p not in heldout]
    recent_from, share = args.recent_from, args.recent_share
    qat = args.qat
    ctx = args.prompt_ctx
    old = _load_samples([p for p in train_paths if _index(p) < recent_from], ctx)
    recent = _load_samples([p for p in train_paths if _index(p) >= recent_from], ctx)
    held = [_load_samples([p], ctx) for p in heldout]
    val = [x for shard in held for x in shard[:32]]
    # Extra dirs (e.g. sampled replies to the same prompts) join the recent pool;
    # replies to a held-out shard's prompts stay out, or the val set would leak.
    more_dirs = [Path(x) for x in args.more_data.split(",") if x]
    held_prompts = {int(x["prompt_index"]) for shard in held for x in shard}
    more_paths = [p for d in more_dirs for p in _shards(d)]
    recent += _load_more(more_paths, held_prompts, ctx)
    samples = old + recent
    last = run / "last.pt"
    state = torch.load(last, weights_only=False) if last.exists() else None
    if state is not None:
        vocab = state["vocab"]
    else:
        vocab = reduced_vocab(_counts(samples, ta.vocab_size), args.vocab, sorted(tok.stop_ids))
    init = None
    if args.init:  # fine-tune a trained draft (its weights unless resuming; vocab above)
        from voicepipe.nn.llm.draft_model import load

        init, _ = load(args.init)
    # --ffn-dim 0: the trained draft's width when fine-tuning one, else the target's.
    ffn_dim = args.ffn_dim or (init.args.ffn_dim if init is not None else ta.ffn_dim)
    a = DraftArgs(
        dim=ta.dim,
        n_head=ta.n_head,
        n_kv_head=ta.n_kv_head,
        head_dim=ta.head_dim,
        ffn_dim=ffn_dim,
        n_layer=1,
        rope_base=ta.rope_base,
        norm_eps=ta.norm_eps,
        target_vocab=ta.vocab_size,
        attn_bias=ta.attn_bias,
    )
    model = EagleDraft(a, vocab)
    if state is None and init is not None:
        sd = {k: v for k, v in init.state_dict().items() if k != "vocab"}
        if init.args.ffn_dim != a.ffn_dim:  # a wider draft that keeps what this one learned
            src = target.layers[-1]
            w13, w2 = src.w13.dequantized().float(), src.w2.dequantized().float()
            try:
                sd = widen_ffn(sd, w13, w2, a.ffn_dim)
            except ValueError as e:  # e.g. --ffn-dim narrower than the trained draft
                raise SystemExit(f"train draft --init {args.init}: {e}") from e
        model.load_state_dict(sd, strict=False)
    elif state is None:
        _init_from_target(model, target)
    head = emb[vocab]  # (Vr, dim)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95))
    step, best = 0, -1.0
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, best = state["step"], state.get("best", -1.0)
    logf = (run / "log.jsonl").open("a")
    t0, acc_loss, acc_n = time.perf_counter(), 0.0, 0
    pending: list[list[dict]] = []  # batches drawn and regrouped by length, not yet trained
    if state is None:  # the starting point, measured like every checkpoint after it
        rec = {"step": 0, **evaluate(model, head, val, emb, qat), "init": args.init, "qat": qat}
        logf.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)
    while step < args.steps:
        if step % 200 == 0:  # pick up shards the gen stage wrote meanwhile
            new = [p for p in _shards(data) if p not in train_paths and p not in heldout]
            if new:
                train_paths += new
                old += _load_samples([p for p in new if _index(p) < recent_from], ctx)
                recent += _load_samples([p for p in new if _index(p) >= recent_from], ctx)
            more = [p for d in more_dirs for p in _shards(d) if p not in more_paths]
            if more:
                more_paths += more
                recent += _load_more(more, held_prompts, ctx)
            samples = old + recent
        lr = (
            args.lr
            * min(1.0, (step + 1) / 100)
            * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        )
        for g in opt.param_groups:
            g["lr"] = lr
        if not pending:
            pending = by_length(pick(old, recent, args.bs * POOL, share), args.bs)
        batch = pending.pop()
        loss = _loss(
            model,
            head,
            *_batch(batch, emb, 256),
            train=True,
            depths=args.depths,
            qat=qat,
            depth_weight=args.depth_weight,
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        acc_loss += float(loss.detach())
        acc_n += 1
        if step % 50 == 0 or step == args.steps:
            ev = evaluate(model, head, val, emb, qat)
            agree = ev["val_top1"]
            rec = {
                "step": step,
                "loss": round(acc_loss / acc_n, 4),
                "lr": lr,
                **ev,
                "samples": len(samples),
                "recent_samples": len(recent),
                "elapsed_s": round(time.perf_counter() - t0, 1),
            }
            logf.write(json.dumps(rec) + "\n")
            logf.flush()
            print(json.dumps(rec), flush=True)
            acc_loss, acc_n = 0.0, 0
            meta = {
                "step": step,
                **ev,
                "qat": qat,
                "val_shards": [p.name for p in heldout],
                "samples": len(samples),
                "target": ta.name,
                "vocab_size": int(vocab.numel()),
            }
            if agree > best:
                best = agree
                save(model, run / "best.pt", meta)
            torch.save(
                {
                    "model": model.state_dict(),
                    "opt": opt.state_dict(),
                    "step": step,
                    "best": best,
                    "vocab": vocab,
                },
                run / "last.tmp",
            )
            (run / "last.tmp").rename(last)
    return 0


def _init_from_target(model, target) -> None:
    """Start the draft layer from the target's last layer: same width, similar job
    (a narrower FFN keeps the channels ``ffn_channels`` ranks first)."""
    src = target.layers[-1]
    ly = model.layers[0]
    w13, w2 = src.w13.dequantized().float(), src.w2.dequantized().float()
    f = w2.shape[1]
    keep = ffn_channels(w13, w2, model.args.ffn_dim)
    with torch.no_grad():
        ly.attn_norm.copy_(src.attn_norm.float())
        ly.ffn_norm.copy_(src.ffn_norm.float())
        ly.wqkv.weight.copy_(src.wqkv.dequantized())
        if ly.wqkv.bias is not None:
            ly.wqkv.bias.copy_(src.wqkv.bias.float())
        ly.wo.weight.copy_(src.wo.dequantized())
        ly.w13.weight.copy_(torch.cat([w13[:f][keep], w13[f:][keep]]))
        ly.w2.weight.copy_(w2[:, keep])
        model.norm.copy_(target.norm.float())


def quantized(model, qat: bool):
    """``model`` as a callable, with the fused draft's weight rounding when ``qat``.

    Rounded weights are substituted per call (``functional_call``), so the
    parameters, the optimizer state and saved checkpoints stay float.
    """
    if not qat:
        return model
    from torch.func import functional_call

    from voicepipe.nn.llm.fake_quant import draft_rounding, ste

    def run(*a, **kw):
        sub = {}
        for name, w in model.named_parameters():
            r = draft_rounding(name, w)
            if r is not None:
                sub[name] = ste(w, r)
        return functional_call(model, sub, a, kw)

    return run


def _loss(
    model,
    head,
    fin,
    nemb,
    fout,
    mask,
    train: bool,
    depths: int = 1,
    qat: bool = False,
    depth_weight: float = 0.8,
) -> torch.Tensor:
    """depth_weight: the loss weight of each further depth (its power): a deeper token
    counts only if the ones before it hold."""
    m = mask.reshape(-1)
    f = fout.reshape(-1, fout.shape[-1])[m]
    logp_t = F.log_softmax(f @ head.T, dim=-1)  # the target's (reduced) distribution, once
    if train:  # EAGLE-style input noise: features at inference are the draft's own guesses
        fin = fin + torch.randn_like(fin) * 0.05 * fin.pow(2).mean(-1, keepdim=True).sqrt()
    fwd = quantized(model, qat)
    with bf16_autocast():
        pred = fwd(fin, nemb, depths=depths)  # (B, T, dim), or (depths, B, T, dim)
    if depths == 1:
        return _terms(pred.float(), head, f, logp_t, m)
    loss = pred.new_zeros((), dtype=torch.float32)
    for s in range(depths):
        ms = _depth_mask(mask, s)
        sel = ms.reshape(-1)[m]  # the rows of f / logp_t this depth is judged on
        if sel.any():
            w = depth_weight**s
            loss = loss + w * _terms(pred[s].float(), head, f[sel], logp_t[sel], ms.reshape(-1))
    return loss


def _depth_mask(mask: torch.Tensor, s: int) -> torch.Tensor:
    """(B, T): rows q whose depth-s draft starts at a reply row (q - s) inside the sample."""
    if s == 0:
        return mask
    out = torch.zeros_like(mask)
    out[:, s:] = mask[:, s:] & mask[:, :-s]
    return out


def _terms(pred, head, f, logp_t, m) -> torch.Tensor:
    p = pred.reshape(-1, pred.shape[-1])[m]
    logp_d = F.log_softmax(p @ head.T, dim=-1)
    kl = F.kl_div(logp_d, logp_t, log_target=True, reduction="batchmean")
    return kl + F.smooth_l1_loss(p, f)


EVAL_DEPTHS = 3


@torch.no_grad()
def evaluate(
    model, head, val: list[dict], emb: torch.Tensor, qat: bool = False
) -> dict[str, float]:
    """Agreement of draft and target on reply positions, drafting 1, 2 and 3 tokens deep.

    The draft runs as the cached decode does (``EagleDraft.unroll``):
    - val_top1: the first drafted token (from the target's own features);
    - val_c2 / val_c3: the second / third drafted token, where the ones before
      it were right (conditional acceptance at that depth);
    - val_tokens: 1 + p1 + p1·c2 + p1·c2·c3, what a pass drafting 3 tokens yields.
    (The logs of the runs before the training-time test, in models/smollm2-draft/,
    have an older val_c2: a causal pass fed the shifted predictions, an approximation;
    and they log val_top1_sf.)
    """
    hits = [0] * EVAL_DEPTHS
    n = [0] * EVAL_DEPTHS
    fwd = quantized(model, qat)
    for i in range(0, len(val), 8):
        fin, nemb, fout, mask = _batch(val[i : i + 8], emb, 512)
        want = (fout @ head.T).argmax(-1)
        pred = fwd(fin, nemb, depths=EVAL_DEPTHS)
        ok = [(pred[s] @ head.T).argmax(-1) == want for s in range(EVAL_DEPTHS)]
        path = mask.clone()  # rows whose path so far was all right
        for s in range(EVAL_DEPTHS):
            if s:  # depth s at row q follows depth s - 1 at row q - 1
                prev = torch.zeros_like(path)
                prev[:, 1:] = path[:, :-1] & ok[s - 1][:, :-1]
                path = prev & _depth_mask(mask, s)
            hits[s] += int(ok[s][path].sum())
            n[s] += int(path.sum())
    p1, c2, c3 = (h / max(1, k) for h, k in zip(hits, n, strict=True))
    return {
        "val_top1": round(p1, 4),
        "val_c2": round(c2, 4),
        "val_c3": round(c3, 4),
        "val_tokens": round(1 + p1 + p1 * c2 + p1 * c2 * c3, 4),
    }


def export(args: argparse.Namespace) -> int:
    """Best checkpoint → fp16 release file, with the reduced vocabulary recounted on all data.

    The head is the target's own frozen embedding, so the draft's output (a
    predicted target feature) works with any subset of rows: recounting the
    vocabulary on every reply generated by now (training may have started on
    the first few hundred) raises coverage without retraining.
    """
    from voicepipe.nn.llm.draft_model import load, reduced_vocab, save
    from voicepipe.training.draft_paths import data_dir, run_dir

    model, meta = load(run_dir(args.run) / "best.pt")
    samples = _load_samples(_shards(data_dir(args.data)))
    counts = _counts(samples, model.args.target_vocab)
    # Whatever ends a finished reply (the stop tokens) must stay proposable.
    ends = sorted(
        {int(s["tokens"][-1]) for s in samples if len(s["tokens"]) - s["prompt_len"] < args.max_new}
    )
    model.vocab = reduced_vocab(counts, args.vocab, ends)
    meta = {
        **meta,
        "vocab_size": args.vocab,
        "vocab_from_samples": len(samples),
        "vocab_from_reply_tokens": int(counts.sum()),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save(model, out, meta)
    print(json.dumps({"out": str(out), **meta}))
    return 0
