"""Fit stage of `voicepipe train draft`: teacher-forced EAGLE training on gen shards.

For a sample with tokens t (n,) and target features f (n-1, dim), draft input
i = (f_i, E[t_{i+1}]) predicts f_{i+1} and, through the frozen head over the
reduced vocabulary, the target's distribution of t_{i+2}. Loss on reply
positions only: KL(target ‖ draft) over the reduced vocabulary (what decides
acceptance) + smooth-L1 on the feature (what keeps multi-step drafting on
track, as in EAGLE).

Robustness to drafting from its own predictions (steps 2..K at inference):
noise on the input features, and optionally (--self-feed, twice the cost per
step) a second pass that feeds the draft its own predicted features
(detached) at a random half of the positions, true features elsewhere.

Resumable: runs/draft/last.pt (model + optimizer + step); best.pt is kept
by held-out top-1 agreement on the newest shard; log.jsonl has one line per
logging interval. New gen shards are picked up while training runs.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F


def _shards(data: Path) -> list[Path]:
    return sorted(data.glob("gen_*.pt"))


def _load_samples(paths: list[Path]) -> list[dict]:
    out: list[dict] = []
    for p in paths:
        out += torch.load(p, map_location="cpu", weights_only=True)
    return out


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


def fit(args: argparse.Namespace) -> int:
    from voicepipe.nn import llama
    from voicepipe.nn.draft_model import DraftArgs, EagleDraft, reduced_vocab, save
    from voicepipe.nn.engine import gguf_path
    from voicepipe.nn.tokenizer import ChatTokenizer
    from voicepipe.training.draft import data_dir, run_dir

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
    heldout_path, train_paths = paths[0], paths[1:]
    samples = _load_samples(train_paths)
    val = _load_samples([heldout_path])[:32]
    last = run / "last.pt"
    state = torch.load(last, weights_only=False) if last.exists() else None
    if state is not None:
        vocab = state["vocab"]
    else:
        vocab = reduced_vocab(_counts(samples, ta.vocab_size), args.vocab, sorted(tok.stop_ids))
    a = DraftArgs(dim=ta.dim, n_head=ta.n_head, n_kv_head=ta.n_kv_head, head_dim=ta.head_dim,
                  ffn_dim=ta.ffn_dim, n_layer=1, rope_base=ta.rope_base, norm_eps=ta.norm_eps,
                  target_vocab=ta.vocab_size)
    model = EagleDraft(a, vocab)
    if state is None:
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
    while step < args.steps:
        if step % 200 == 0:  # pick up shards the gen stage wrote meanwhile
            new = [p for p in _shards(data)[1:] if p not in train_paths]
            if new:
                train_paths += new
                samples += _load_samples(new)
        lr = args.lr * min(1.0, (step + 1) / 100) * (
            0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        batch = random.sample(samples, min(args.bs, len(samples)))
        loss = _loss(model, head, *_batch(batch, emb, 256), train=True,
                     self_feed=args.self_feed)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        acc_loss += float(loss.detach())
        acc_n += 1
        if step % 50 == 0 or step == args.steps:
            agree = evaluate(model, head, val, emb)
            rec = {"step": step, "loss": round(acc_loss / acc_n, 4), "lr": lr,
                   "val_top1": agree, "samples": len(samples),
                   "elapsed_s": round(time.perf_counter() - t0, 1)}
            logf.write(json.dumps(rec) + "\n")
            logf.flush()
            print(json.dumps(rec), flush=True)
            acc_loss, acc_n = 0.0, 0
            meta = {"step": step, "val_top1": agree, "samples": len(samples),
                    "target": ta.name, "vocab_size": int(vocab.numel())}
            if agree > best:
                best = agree
                save(model, run / "best.pt", meta)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "best": best, "vocab": vocab}, run / "last.tmp")
            (run / "last.tmp").rename(last)
    return 0


def _init_from_target(model, target) -> None:  # noqa: ANN001
    """Start the draft layer from the target's last layer: same width, similar job."""
    src = target.layers[-1]
    ly = model.layers[0]
    with torch.no_grad():
        ly.attn_norm.copy_(src.attn_norm.float())
        ly.ffn_norm.copy_(src.ffn_norm.float())
        ly.wqkv.weight.copy_(src.wqkv.dequantized())
        ly.wo.weight.copy_(src.wo.dequantized())
        ly.w13.weight.copy_(src.w13.dequantized())
        ly.w2.weight.copy_(src.w2.dequantized())
        model.norm.copy_(target.norm.float())


def _loss(model, head, fin, nemb, fout, mask, train: bool,  # noqa: ANN001
          self_feed: bool = False) -> torch.Tensor:
    m = mask.reshape(-1)
    f = fout.reshape(-1, fout.shape[-1])[m]
    logp_t = F.log_softmax(f @ head.T, dim=-1)  # the target's (reduced) distribution, once
    if train:  # EAGLE-style input noise: features at inference are the draft's own guesses
        fin = fin + torch.randn_like(fin) * 0.05 * fin.pow(2).mean(-1, keepdim=True).sqrt()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        pred = model(fin, nemb)  # (B, T, dim)
    loss = _terms(pred.float(), head, f, logp_t, m)
    if train and self_feed:  # a random half of the inputs are the draft's own predictions
        shifted = torch.cat([fin[:, :1], pred.detach().float()[:, :-1]], dim=1)
        pick = torch.rand(fin.shape[:2])[..., None] < 0.5
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred2 = model(torch.where(pick, shifted, fin), nemb)
        loss = loss + _terms(pred2.float(), head, f, logp_t, m)
    return loss


def _terms(pred, head, f, logp_t, m) -> torch.Tensor:  # noqa: ANN001
    p = pred.reshape(-1, pred.shape[-1])[m]
    logp_d = F.log_softmax(p @ head.T, dim=-1)
    kl = F.kl_div(logp_d, logp_t, log_target=True, reduction="batchmean")
    return kl + F.smooth_l1_loss(p, f)


@torch.no_grad()
def evaluate(model, head, val: list[dict], emb: torch.Tensor) -> float:  # noqa: ANN001
    """Teacher-forced top-1 agreement of draft and target on reply positions."""
    hits = total = 0
    for i in range(0, len(val), 8):
        fin, nemb, fout, mask = _batch(val[i : i + 8], emb, 512)
        pred = model(fin, nemb)
        a = (pred @ head.T).argmax(-1) == (fout @ head.T).argmax(-1)
        hits += int(a[mask].sum())
        total += int(mask.sum())
    return round(hits / max(1, total), 4)


def export(args: argparse.Namespace) -> int:
    """Best checkpoint → fp16 release file, with the reduced vocabulary recounted on all data.

    The head is the target's own frozen embedding, so the draft's output (a
    predicted target feature) works with any subset of rows: recounting the
    vocabulary on every reply generated by now (training may have started on
    the first few hundred) raises coverage without retraining.
    """
    from voicepipe.nn.draft_model import load, reduced_vocab, save
    from voicepipe.training.draft import data_dir, run_dir

    model, meta = load(run_dir(args.run) / "best.pt")
    samples = _load_samples(_shards(data_dir(args.data)))
    counts = _counts(samples, model.args.target_vocab)
    # Whatever ends a finished reply (the stop tokens) must stay proposable.
    ends = sorted({int(s["tokens"][-1]) for s in samples if len(s["tokens"]) - s["prompt_len"]
                   < args.max_new})
    model.vocab = reduced_vocab(counts, args.vocab, ends)
    meta = {**meta, "vocab_size": args.vocab, "vocab_from_samples": len(samples),
            "vocab_from_reply_tokens": int(counts.sum())}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save(model, out, meta)
    print(json.dumps({"out": str(out), **meta}))
    return 0
