"""`voicepipe train tts`: train the codec LM (target + draft together) or the duration predictor.

Data: $VOICEPIPE_HOME/data/tts (``voicepipe train tts-data --codes``), plus with
``--more-data DIR[,DIR]`` other directories in the same layout, such as the
domain corpus of ``voicepipe train tts-domain`` (assistant replies, numbers,
names, lists; encode its codes first with ``voicepipe train tts-data
--codes-only --out DIR``). Runs under
$VOICEPIPE_HOME/runs/tts/<run>/: ``latest.pt`` (every --ckpt-min minutes, resumed
automatically), ``step<N>.pt`` snapshots (every --snapshot-min), ``loss.jsonl``.
The learning rate follows a cosine over a wall-clock budget (--minutes), since
on this shared CPU the number of steps an hour buys is not known in advance.
Checkpoints are judged by free-running round-trip WER (``voicepipe bench tts``),
never by this loss.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from pathlib import Path

from voicepipe.training.runs import add_run_args, lr_at, save_atomic

log = logging.getLogger(__name__)


def runs_dir() -> Path:
    from voicepipe import registry

    return registry.home() / "runs" / "tts"


def load_utterances(
    root: Path,
    n_q: int,
    split: str = "train",
    need_codes: bool = True,
    missing: list[str] | None = None,
) -> list[dict]:
    """Manifest rows of one split with codes (T, n_q) and frame alignment attached.

    need_codes True: rows whose codes/ID.npy does not exist (yet) are left out and
    their ids appended to ``missing``. need_codes False (duration predictor): such
    rows get a dummy (T, n_q) of zeros sized from the durations, so batching and
    collation stay the same."""
    import numpy as np

    from voicepipe.nn.tts.phonemes import align, n_frames_for
    from voicepipe.training.tts_data import read_manifest

    out = []
    for row in read_manifest(root):
        if row["split"] != split:
            continue
        path = root / "codes" / f"{row['id']}.npy"
        if path.exists():
            codes = np.load(path)[:, :n_q].astype(np.int64)
        elif need_codes:
            if missing is not None:
                missing.append(row["id"])
            continue
        else:
            codes = np.zeros((n_frames_for(row["durations"]), n_q), np.int64)
        al = align(row["durations"], n_frames=codes.shape[0])
        out.append(
            {
                "id": row["id"],
                "text": row["text"],
                "phon": np.asarray(row["phonemes"]),
                "dur": np.asarray(row["durations"]),
                "codes": codes,
                "al": al,
            }
        )
    return out


def load_all(
    root: Path, more_data: str, n_q: int, need_codes: bool, allow_missing: bool = False
) -> list[dict]:
    """Training rows of ``root`` and of each ``more_data`` directory (comma-separated).

    A manifest row without codes is a corpus whose encoding has not finished (or
    failed): `train tts` once read 7,671 of the domain corpus's 8,250 rows because it
    was started while `tts-data --codes-only` was still writing the last 579. So
    missing codes stop the run, naming them, unless ``allow_missing``."""
    utts: list[dict] = []
    for d in [root, *(Path(x) for x in more_data.split(",") if x)]:
        missing: list[str] = []
        rows = load_utterances(d, n_q, need_codes=need_codes, missing=missing)
        log.info("%s: %d training utterances", d, len(rows))
        if missing:
            msg = (
                f"{d}: {len(missing)} training rows have no codes/ID.npy (first: "
                f"{', '.join(missing[:3])}); encode them with `voicepipe train tts-data "
                f"--codes-only --out {d}` (wait for a running encoder to finish)"
            )
            if not allow_missing:
                raise SystemExit(msg + ", or pass --allow-missing-codes to train without them")
            log.warning("%s; training without them (--allow-missing-codes)", msg)
        utts += rows
    return utts


def batches(utts: list[dict], max_frames: int, rng: random.Random) -> list[list[int]]:
    """Length-bucketed batches with at most ~max_frames padded frames each, shuffled."""
    order = sorted(range(len(utts)), key=lambda i: utts[i]["codes"].shape[0] + rng.random() * 8)
    out, cur, longest = [], [], 0
    for i in order:
        t = utts[i]["codes"].shape[0]
        if cur and max(longest, t) * (len(cur) + 1) > max_frames:
            out.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, t)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def collate(utts: list[dict], idx: list[int]):
    import numpy as np
    import torch

    from voicepipe.nn.tts.phonemes import LOOKAHEAD

    sel = [utts[i] for i in idx]
    b = len(sel)
    t = max(u["codes"].shape[0] for u in sel)
    p = max(u["phon"].shape[0] for u in sel)
    q = sel[0]["codes"].shape[1]
    phon = np.zeros((b, p), np.int64)
    dur = np.zeros((b, p), np.int64)
    pmask = np.zeros((b, p), bool)
    codes = np.zeros((b, t, q), np.int64)
    mask = np.zeros((b, t), bool)
    index = np.zeros((b, t), np.int64)
    ahead = np.zeros((b, t, LOOKAHEAD), np.int64)
    prog = np.zeros((b, t), np.int64)
    durb = np.zeros((b, t), np.int64)
    for j, u in enumerate(sel):
        n, m = u["codes"].shape[0], u["phon"].shape[0]
        phon[j, :m], dur[j, :m], pmask[j, :m] = u["phon"], u["dur"], True
        codes[j, :n], mask[j, :n] = u["codes"], True
        index[j, :n], ahead[j, :n] = u["al"].index, u["al"].ahead
        prog[j, :n], durb[j, :n] = u["al"].progress, u["al"].dur_bucket
    tt = torch.from_numpy
    al = {"index": tt(index), "ahead": tt(ahead), "progress": tt(prog), "dur_bucket": tt(durb)}
    return tt(phon), tt(dur), tt(pmask), tt(codes), tt(mask), al


def init_states(path: Path) -> dict:
    """{"args": {name: model args}, "models": {name: float32 state dict}} of a model
    directory (models/codec-lm-hibari: config.json + NAME.pt, fp16) or of a
    `train tts` checkpoint (runs/tts/RUN/latest.pt or stepN.pt)."""
    import torch

    if path.is_dir():
        cfg = json.loads((path / "config.json").read_text())
        names = [k for k in ("target", "draft", "duration") if (path / f"{k}.pt").exists()]
        states = {k: torch.load(path / f"{k}.pt", map_location="cpu") for k in names}
        margs = {k: cfg[k] for k in names}
    else:
        ck = torch.load(path, map_location="cpu", weights_only=False)
        states, margs = ck["models"], ck["args"]
    floats = {
        k: {n: (v.float() if v.is_floating_point() else v) for n, v in st.items()}
        for k, st in states.items()
    }
    return {"args": margs, "models": floats}


def train(args: argparse.Namespace) -> int:
    import torch

    from voicepipe.nn.tts.codec_lm import (
        CodecLM,
        ModelArgs,
        corrupt_prev,
        describe,
        init_weights,
        lm_loss,
    )
    from voicepipe.nn.tts.duration import DurArgs, DurationPredictor, duration_loss
    from voicepipe.nn.tts.hibari_teacher import n_phoneme_ids
    from voicepipe.training.tts_data import data_dir

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    root = Path(args.data) if args.data else data_dir()
    run = runs_dir() / args.run
    run.mkdir(parents=True, exist_ok=True)
    n_phon = n_phoneme_ids()
    what = args.what
    # --init: start from trained weights (fine-tuning) instead of a random init; the
    # architecture is the init's, not the --dim/--layers flags. A resumed run's
    # latest.pt (below) still wins over it.
    init = init_states(Path(args.init)) if args.init else None
    if what == "duration":
        dargs = DurArgs(**init["args"]["duration"]) if init else DurArgs(n_phon=n_phon)
        models = {"duration": DurationPredictor(dargs)}
    else:
        target = CodecLM(
            ModelArgs(**init["args"]["target"])
            if init
            else ModelArgs(
                n_phon=n_phon, n_q=args.n_q, dim=args.dim, n_layers=args.layers, n_heads=args.heads
            )
        )
        draft = CodecLM(
            ModelArgs(**init["args"]["draft"])
            if init
            else ModelArgs(
                n_phon=n_phon,
                n_q=1,
                dim=args.draft_dim,
                n_layers=args.draft_layers,
                n_heads=args.draft_heads,
            )
        )
        init_weights(target)
        init_weights(draft)
        models = {"target": target, "draft": draft}
    if init:
        for k, m in models.items():
            m.load_state_dict(init["models"][k])
        log.info("initialised %s from %s", ", ".join(models), args.init)
    opts = {
        k: torch.optim.AdamW(m.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
        for k, m in models.items()
    }
    step, elapsed = 0, 0.0
    latest = run / "latest.pt"
    if latest.exists():
        ck = torch.load(latest, map_location="cpu", weights_only=False)
        for k, m in models.items():
            m.load_state_dict(ck["models"][k])
            opts[k].load_state_dict(ck["opts"][k])
        step, elapsed = ck["step"], ck["elapsed"]
        log.info("resumed %s at step %d (%.0f s)", latest, step, elapsed)
    for k, m in models.items():
        log.info(
            "%s: %s",
            k,
            describe(m)
            if isinstance(m, CodecLM)
            else f"{sum(p.numel() for p in m.parameters()) / 1e6:.2f}M params",
        )

    # More data sets in the same layout (e.g. `voicepipe train tts-domain`'s replies,
    # encoded with `voicepipe train tts-data --codes-only --out DIR`).
    utts = load_all(root, args.more_data, args.n_q, what != "duration", args.allow_missing_codes)
    if not utts:
        raise SystemExit(
            f"no training utterances with codes under {root}; run "
            "`voicepipe train tts-data --codes` first"
        )
    log.info(
        "%d training utterances, %.1f min of audio",
        len(utts),
        sum(u["codes"].shape[0] for u in utts) * 1024 / 22050 / 60,
    )

    def save(path: Path) -> None:
        ck = {
            "models": {k: m.state_dict() for k, m in models.items()},
            "opts": {k: o.state_dict() for k, o in opts.items()},
            "args": {k: m.args.to_dict() for k, m in models.items()},
            "step": step,
            "elapsed": elapsed,
            "what": what,
        }
        save_atomic(ck, path)

    budget = args.minutes * 60.0
    t_start = time.perf_counter() - elapsed
    last_ck = last_snap = time.perf_counter()
    logf = open(run / "loss.jsonl", "a", encoding="utf-8")
    gen = torch.Generator().manual_seed(args.seed + step)
    for m in models.values():
        m.train()
    done = False
    while not done:
        for bidx in batches(utts, args.batch_frames, rng):
            phon, dur, pmask, codes, mask, al = collate(utts, bidx)
            elapsed = time.perf_counter() - t_start
            lr = lr_at(elapsed, budget, args.lr)
            rec = {
                "step": step,
                "elapsed_s": round(elapsed, 1),
                "lr": lr,
                "frames": int(mask.sum()),
                "phonemes": int(pmask.sum()),
            }
            for k, m in models.items():
                for g in opts[k].param_groups:
                    g["lr"] = lr
                if k == "duration":
                    loss = duration_loss(m, phon, dur, pmask)
                    stats = {"loss": float(loss.detach())}
                else:
                    prev0 = corrupt_prev(codes[..., 0], m.args, args.p_replace, args.p_drop, gen)
                    loss, stats = lm_loss(m, phon, al, prev0, codes[..., : m.args.n_q], mask)
                opts[k].zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
                opts[k].step()
                rec.update({f"{k}.{s}": round(v, 4) for s, v in stats.items()})
            step += 1
            logf.write(json.dumps(rec) + "\n")
            if step % 10 == 0:
                logf.flush()
                log.info("%s", rec)
            now = time.perf_counter()
            if now - last_ck > args.ckpt_min * 60:
                save(latest)
                last_ck = now
            if now - last_snap > args.snapshot_min * 60:
                save(run / f"step{step}.pt")
                last_snap = now
            if elapsed >= budget or (args.max_steps and step >= args.max_steps):
                done = True
                break
    elapsed = time.perf_counter() - t_start
    save(latest)
    save(run / f"step{step}.pt")
    logf.close()
    print(f"train tts: {what} run {run} finished at step {step} ({elapsed / 60:.1f} min)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tts",
        help="train the codec LM (target + draft) or the duration predictor",
        description=(
            "Train on $VOICEPIPE_HOME/data/tts (see `voicepipe train tts-data`). --what lm trains "
            "the target codec LM and its small draft on the same batches; --what duration trains "
            "the duration predictor on hibari's durations. Checkpoints and loss.jsonl go to "
            "$VOICEPIPE_HOME/runs/tts/RUN; rerunning the same command resumes. Run it in the "
            "background with nice -n 10."
        ),
    )
    p.add_argument("--what", choices=["lm", "duration"], default="lm")
    p.add_argument("--run", default="lm", help="run name (directory under runs/tts)")
    p.add_argument("--data", default="", help="data directory (default $VOICEPIPE_HOME/data/tts)")
    p.add_argument(
        "--more-data",
        default="",
        metavar="DIR[,DIR]",
        help="also train on these data directories (same layout, codes encoded), e.g. "
        "$VOICEPIPE_HOME/data/tts_domain from `voicepipe train tts-domain`",
    )
    p.add_argument(
        "--init",
        default="",
        metavar="PATH",
        help="fine-tune: start from these weights (a model directory such as "
        "models/codec-lm-hibari, or a train tts checkpoint); the architecture is theirs",
    )
    p.add_argument(
        "--allow-missing-codes",
        action="store_true",
        help="train even if some manifest rows have no codes yet (default: stop, naming them)",
    )
    p.add_argument("--n-q", type=int, default=4, help="codec levels the target predicts")
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--draft-dim", type=int, default=192)
    p.add_argument("--draft-layers", type=int, default=2)
    p.add_argument("--draft-heads", type=int, default=3)
    p.add_argument("--batch-frames", type=int, default=2400, help="padded frames per batch")
    p.add_argument("--lr", type=float, default=1.5e-3)
    p.add_argument("--p-replace", type=float, default=0.3, help="prev codes replaced at random")
    p.add_argument("--p-drop", type=float, default=0.3, help="prev frames hidden")
    add_run_args(p, minutes=90.0, ckpt_min=4.0, snapshot_min=15.0)
    p.set_defaults(func=lambda a: train(a))
