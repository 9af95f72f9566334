"""`voicepipe train codec`: k-means residual VQ codebooks over 4-stacked HiFi-GAN log-mels.

Data: the teacher-speech set of `voicepipe train tts-data` (manifest.jsonl with
22,050 Hz WAVs, "train"/"heldout" splits). A seeded shuffle of the train split
is read until ``--minutes`` of audio; each level's k-means (k-means++ init,
Lloyd iterations, empty clusters re-seeded from the worst-fit points) runs on
the residual the previous levels left. Held-out utterances give the
reconstruction error per Q, which is printed and stored with the codebooks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


def kmeans_pp_init(
    x: torch.Tensor, k: int, gen: torch.Generator, max_points: int = 16384
) -> torch.Tensor:
    """k-means++ seeding on x (N, D) → (k, D); D² sampling keeps seeds spread out.

    Seeds are drawn from a random subset of at most ``max_points`` rows: the k
    sequential passes over all N rows would cost more than the Lloyd iterations.
    """
    import torch  # lazy: `voicepipe --help` must not pay for torch

    if x.shape[0] > max_points:
        x = x[torch.randperm(x.shape[0], generator=gen)[:max_points]]
    n = x.shape[0]
    first = int(torch.randint(n, (1,), generator=gen))
    centres = [x[first]]
    d2 = (x - x[first]).square().sum(-1)  # (N,)
    for _ in range(1, k):
        total = float(d2.sum())
        if total <= 0:
            idx = int(torch.randint(n, (1,), generator=gen))
        else:
            idx = int(torch.multinomial(d2 / total, 1, generator=gen))
        centres.append(x[idx])
        d2 = torch.minimum(d2, (x - x[idx]).square().sum(-1))
    return torch.stack(centres)


def assign(
    x: torch.Tensor, c: torch.Tensor, block: int = 16384
) -> tuple[torch.Tensor, torch.Tensor]:
    """Nearest centre per row: (N,) indices and (N,) squared distances."""
    import torch  # lazy: `voicepipe --help` must not pay for torch

    csq = (c * c).sum(-1)
    idx, dist = [], []
    for i in range(0, x.shape[0], block):
        xb = x[i : i + block]
        d = csq[None, :] - 2.0 * (xb @ c.T)  # (b, K)
        m, j = d.min(dim=1)
        idx.append(j)
        dist.append((m + (xb * xb).sum(-1)).clamp_min(0.0))
    return torch.cat(idx), torch.cat(dist)


def kmeans(x: torch.Tensor, k: int, iters: int, gen: torch.Generator) -> torch.Tensor:
    """Lloyd's k-means on x (N, D) → centres (k, D)."""
    import torch  # lazy: `voicepipe --help` must not pay for torch

    c = kmeans_pp_init(x, k, gen)
    for it in range(iters):
        idx, dist = assign(x, c)
        sums = torch.zeros_like(c).index_add_(0, idx, x)
        counts = torch.bincount(idx, minlength=k).to(x.dtype)
        empty = counts == 0
        c = torch.where(empty[:, None], c, sums / counts.clamp_min(1)[:, None])
        if empty.any():
            # Re-seed empty clusters on the points that are currently worst represented.
            worst = dist.topk(int(empty.sum())).indices
            c[empty] = x[worst]
        log.info(
            "  iter %d: mse/dim %.4f, empty %d",
            it,
            float(dist.mean()) / x.shape[1],
            int(empty.sum()),
        )
    return c


def train_rvq(x: torch.Tensor, levels: int, k: int, iters: int, seed: int) -> torch.Tensor:
    """Residual VQ: level l is k-means on what levels < l left. x (N, D) → (levels, k, D)."""
    import torch  # lazy: `voicepipe --help` must not pay for torch

    gen = torch.Generator().manual_seed(seed)
    r = x.clone()
    books = []
    for lvl in range(levels):
        t0 = time.perf_counter()
        c = kmeans(r, k, iters, gen)
        idx, dist = assign(r, c)
        r = r - c[idx]
        books.append(c)
        log.info(
            "level %d: residual rms %.4f (%.1f s)",
            lvl,
            float(dist.mean() / x.shape[1]) ** 0.5,
            time.perf_counter() - t0,
        )
    return torch.stack(books)


def load_steps(
    root: Path, split: str, minutes: float, seed: int
) -> tuple[torch.Tensor, list[dict]]:
    """Stacked mel steps (N, 320) of a seeded selection of one split, up to ``minutes``.

    Cached under $VOICEPIPE_HOME/runs/codec/ (keyed by data dir, split, minutes, seed,
    manifest size): reading and analysing the WAVs is the slow part of a rerun.
    """
    import torch  # lazy: `voicepipe --help` must not pay for torch

    from voicepipe import registry
    from voicepipe.audio import read_wav
    from voicepipe.nn.tts.codec import wave_to_steps
    from voicepipe.nn.vocoder.mel import SAMPLE_RATE
    from voicepipe.training.tts_data import read_manifest

    manifest = read_manifest(root)
    key = hashlib.sha1(f"{root.resolve()}|{split}|{minutes}|{seed}|{len(manifest)}".encode())
    cache = registry.home() / "runs" / "codec" / f"steps-{key.hexdigest()[:16]}.pt"
    if cache.exists():
        blob = torch.load(cache, weights_only=True)
        ids = set(blob["ids"])
        return blob["steps"], [r for r in manifest if r["id"] in ids]
    rows = sorted((r for r in manifest if r.get("split") == split), key=lambda r: r["id"])
    random.Random(seed).shuffle(rows)
    steps, used, seconds = [], [], 0.0
    for r in rows:
        if seconds >= minutes * 60:
            break
        wave, sr = read_wav(root / r["wav"])
        if sr != SAMPLE_RATE:
            raise ValueError(f"{r['wav']}: {sr} Hz, the codec needs {SAMPLE_RATE}")
        steps.append(wave_to_steps(wave))
        used.append(r)
        seconds += len(wave) / sr
    if not steps:
        return torch.zeros(0, 320), []
    x = torch.cat(steps)
    cache.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"steps": x, "ids": [r["id"] for r in used]}, cache)
    return x, used


def _handler(args: argparse.Namespace) -> int:
    import torch  # lazy: `voicepipe --help` must not pay for torch

    from voicepipe.nn.tts.codec import MelVQCodec, rvq_encode
    from voicepipe.training.tts_data import data_dir

    torch.set_num_threads(args.threads)
    root = Path(args.data) if args.data else data_dir()
    if not (root / "manifest.jsonl").exists():
        print(
            f"train codec: no teacher data at {root}/manifest.jsonl; generate it with "
            "'voicepipe train tts-data' (or pass --data DIR)"
        )
        return 1
    t0 = time.perf_counter()
    x, used = load_steps(root, "train", args.minutes, args.seed)
    if x.shape[0] < args.size * 4:
        print(f"train codec: only {x.shape[0]} steps of training audio; need ≥ {args.size * 4}")
        return 1
    minutes = x.shape[0] * 1024 / 22050 / 60
    log.info(
        "%d train utterances, %.1f min, %d steps (%.1f s)",
        len(used),
        minutes,
        x.shape[0],
        time.perf_counter() - t0,
    )
    books = train_rvq(x, args.levels, args.size, args.iters, args.seed)
    train_s = time.perf_counter() - t0
    # Held-out reconstruction error per Q, with the fp16 codebooks that are committed.
    books16 = books.half().float()
    hx, held = load_steps(root, "heldout", 1e9, 0)
    err = {}
    if hx.shape[0]:
        codes = rvq_encode(hx, books16)
        rec = torch.zeros_like(hx)
        for q in range(args.levels):
            rec = rec + books16[q][codes[:, q]]
            err[q + 1] = round(float((hx - rec).square().mean().sqrt()), 4)
    meta = {
        "trained_on": f"{len(used)} train utterances of {root.name} ({minutes:.1f} min)",
        "levels": args.levels,
        "codebook_size": args.size,
        "iters": args.iters,
        "seed": args.seed,
        "train_seconds": round(train_s, 1),
        "heldout_rms_by_q": json.dumps(err),
    }
    codec = MelVQCodec(books, meta=meta)
    out = codec.save(args.out)
    summary = {**meta, "heldout_rms_by_q": err, "heldout_utterances": len(held), "out": str(out)}
    print(json.dumps(summary, indent=1))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "codec",
        help="train the MelVQ codec's RVQ codebooks (k-means per level) on teacher speech",
        description=(
            "Train residual-VQ codebooks (k-means per level, k-means++ init) over 4-stacked "
            "HiFi-GAN log-mels of the teacher speech from 'voicepipe train tts-data'. Writes "
            "fp16 codebooks (all levels) and prints held-out reconstruction RMS per Q."
        ),
    )
    p.add_argument(
        "--data",
        default="",
        help="teacher data dir with manifest.jsonl (default $VOICEPIPE_HOME/data/tts)",
    )
    p.add_argument("--out", default="models/melvq-hibari", help="output dir or .pt file")
    p.add_argument("--minutes", type=float, default=45.0, help="train audio to use (default 45)")
    p.add_argument("--levels", type=int, default=8, help="RVQ levels (default 8)")
    p.add_argument("--size", type=int, default=1024, help="entries per codebook (default 1024)")
    p.add_argument("--iters", type=int, default=12, help="Lloyd iterations per level")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.set_defaults(func=_handler)
