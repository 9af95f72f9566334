"""`voicepipe train vocoder`: the frame-rate iSTFT vocoder (nn/vocoder/istft_vocoder.py) for the
codec's mels, trained on the teacher's recordings.

Inputs are the mels the TTS really hands a vocoder: each utterance's stored codes
(``codes/ID.npy`` of `voicepipe train tts-data` and `tts-domain`), first ``q`` levels,
decoded by the codec to a log-mel (80, 4T); targets are the teacher's waves of the
same utterances (``wav/ID.wav``, 22,050 Hz), zero-padded to 4T · 256 samples. Each
example is a 64-frame crop (0.74 s) with 36 frames of input context before it and
12 after (the model's receptive field: the crop's loss sees no edge the utterance
does not have; crops may reach past the utterance's ends, into silence, so the edges
are learnt too). Losses: training/vocoder_loss.py.

Checkpoints go to $VOICEPIPE_HOME/runs/vocoder/RUN (latest.pt every few minutes,
stepN.pt snapshots, loss.jsonl with held-out losses); rerunning the same command
resumes. ``--export CKPT`` writes the fp16 model to models/vocoder-hibari.
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

CTX_L, CTX_R, CROP = 36, 12, 64  # frames of context before / after, frames scored
EXPORT_DIR = Path("models/vocoder-hibari")


def load_rows(dirs: list[Path], split: str, q: int, limit: int = 0) -> list[dict]:
    """{"id", "mel": (80, F) float16 tensor, "wave": (F·256,) int16 tensor} per usable row."""
    import numpy as np
    import torch

    from voicepipe.audio import read_wav
    from voicepipe.nn.tts.codec import MelVQCodec
    from voicepipe.training.tts_data import read_manifest

    codec = MelVQCodec.load("melvq-hibari", q=q)
    out: list[dict] = []
    for d in dirs:
        n0, missing = len(out), 0
        for r in read_manifest(d):
            if r.get("split", "train") != split:
                continue
            cp = d / "codes" / f"{r['id']}.npy"
            if not cp.exists():
                missing += 1  # not encoded yet: said below, not dropped in silence
                continue
            codes = torch.from_numpy(np.load(cp)[:, :q].astype(np.int64))
            wave, sr = read_wav(d / r["wav"])
            if sr != 22050:
                raise SystemExit(f"{d / r['wav']}: {sr} Hz, expected 22,050")
            mel = codec.decode_mel(codes)
            n = mel.shape[1] * 256
            w = np.zeros(n, np.float32)
            w[: min(n, len(wave))] = wave[:n]
            out.append({
                "id": r["id"],
                "mel": mel.to(torch.float16),
                "wave": torch.from_numpy(np.clip(w * 32767.0, -32768, 32767).astype(np.int16)),
            })  # fmt: skip
            if limit and len(out) >= limit:
                return out
        log.info("%s: %d %s utterances", d, len(out) - n0, split)
        if missing:
            log.warning("%s: %d %s rows have no codes/ID.npy yet (`voicepipe train tts-data "
                        "--codes-only --out %s` encodes them); training without them",
                        d, missing, split, d)  # fmt: skip
    return out


def crop(row: dict, s: int):
    """Input mel frames [s − CTX_L, s + CROP + CTX_R) (silence outside the utterance) and
    target samples of frames [s, s + CROP) (zeros outside)."""
    import torch

    from voicepipe.nn.vocoder.istft_vocoder import SILENCE

    mel, wave = row["mel"], row["wave"]
    f = mel.shape[1]
    a, b = s - CTX_L, s + CROP + CTX_R
    m = torch.full((mel.shape[0], b - a), SILENCE)
    lo, hi = max(a, 0), min(b, f)
    if hi > lo:
        m[:, lo - a : hi - a] = mel[:, lo:hi].float()
    y = torch.zeros(CROP * 256)
    lo, hi = max(s, 0), min(s + CROP, f)
    if hi > lo:
        y[(lo - s) * 256 : (hi - s) * 256] = wave[lo * 256 : hi * 256].float() / 32767.0
    return m, y


def batch(rows: list[dict], n: int, rng: random.Random):
    import torch

    mels, ys = [], []
    for _ in range(n):
        r = rows[rng.randrange(len(rows))]
        f = r["mel"].shape[1]
        s = rng.randint(-CROP // 8, max(f - CROP + CROP // 8, -CROP // 8))
        m, y = crop(r, s)
        mels.append(m)
        ys.append(y)
    return torch.stack(mels), torch.stack(ys)


def scored(model, mels):
    """The model's wave for the scored frames of a batch of crops."""
    return model(mels)[:, CTX_L * 256 : (CTX_L + CROP) * 256]


def heldout_loss(model, rows: list[dict]) -> dict[str, float]:
    """Loss terms over whole held-out utterances (the edges included)."""
    import torch

    from voicepipe.training.vocoder_loss import spectral_losses

    acc: dict[str, float] = {}
    with torch.no_grad():
        for r in rows:
            y = r["wave"].float()[None] / 32767.0
            terms = spectral_losses(model(r["mel"].float()[None]), y)
            for k, v in terms.items():
                acc[k] = acc.get(k, 0.0) + float(v) / len(rows)
    return {k: round(v, 4) for k, v in acc.items()}


def train(args: argparse.Namespace) -> int:
    import torch

    from voicepipe import registry
    from voicepipe.nn.vocoder.istft_vocoder import FILE_NAME, IstftArgs, IstftVocoder
    from voicepipe.training.vocoder_loss import spectral_losses, total

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    if args.export:
        ck = torch.load(args.export, map_location="cpu", weights_only=False)
        m = IstftVocoder(IstftArgs(**ck["args"]))
        m.load_state_dict(ck["model"])
        out = Path(args.out or EXPORT_DIR) / FILE_NAME
        path = m.save(out, meta={"step": ck["step"], "from": str(args.export)})
        note = "" if args.out else "; its sha256 goes into models/vocoder-hibari.toml"
        print(f"wrote {path} (step {ck['step']}); use: --codec.vocoder={path.parent}{note}")
        return 0
    home = registry.home()
    dirs = [
        Path(x) for x in (args.data or f"{home}/data/tts,{home}/data/tts_domain").split(",") if x
    ]
    run = home / "runs" / "vocoder" / args.run
    run.mkdir(parents=True, exist_ok=True)
    model = IstftVocoder(IstftArgs(args.channels, args.blocks))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.8, 0.99), weight_decay=0.01)
    step, elapsed = 0, 0.0
    latest = run / "latest.pt"
    if latest.exists():
        ck = torch.load(latest, map_location="cpu", weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, elapsed = ck["step"], ck["elapsed"]
        log.info("resumed %s at step %d (%.0f s)", latest, step, elapsed)
    log.info("vocoder: %.2fM params", sum(p.numel() for p in model.parameters()) / 1e6)
    t0 = time.perf_counter()
    rows = load_rows(dirs, "train", args.q)
    held = load_rows(dirs[:1], "heldout", args.q, limit=args.heldout)
    if not rows:
        raise SystemExit(f"no utterances with codes under {', '.join(map(str, dirs))}; run "
                         "`voicepipe train tts-data` first")  # fmt: skip
    minutes = sum(r["wave"].numel() for r in rows) / 22050 / 60
    log.info("%d training utterances (%.1f min), %d held out, loaded in %.0f s",
             len(rows), minutes, len(held), time.perf_counter() - t0)  # fmt: skip

    def save(path: Path) -> None:
        ck = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
              "elapsed": elapsed, "args": vars(model.args).copy()}  # fmt: skip
        save_atomic(ck, path)

    rng = random.Random(args.seed + step)
    budget = args.minutes * 60.0
    t_start = time.perf_counter() - elapsed
    last_ck = last_snap = time.perf_counter()
    with open(run / "loss.jsonl", "a", encoding="utf-8") as logf:
        model.train()
        while elapsed < budget and (not args.max_steps or step < args.max_steps):
            elapsed = time.perf_counter() - t_start
            lr = lr_at(elapsed, budget, args.lr)
            for g in opt.param_groups:
                g["lr"] = lr
            mels, y = batch(rows, args.batch, rng)
            terms = spectral_losses(scored(model, mels), y)
            loss = total(terms)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 50 == 0:
                rec: dict[str, object] = {"step": step, "min": round(elapsed / 60, 2), "lr": lr,
                       "loss": round(float(loss.detach()), 4),
                       **{k: round(float(v.detach()), 4) for k, v in terms.items()}}  # fmt: skip
                logf.write(json.dumps(rec) + "\n")
                logf.flush()
                log.info("%s", rec)
            now = time.perf_counter()
            if now - last_ck > args.ckpt_min * 60:
                save(latest)
                last_ck = now
            if now - last_snap > args.snapshot_min * 60:
                model.eval()
                rec = {"step": step, "heldout": heldout_loss(model, held)}
                model.train()
                logf.write(json.dumps(rec) + "\n")
                log.info("%s", rec)
                save(run / f"step{step}.pt")
                last_snap = now
        save(latest)
        save(run / f"step{step}.pt")
    print(f"train vocoder: run {run} finished at step {step} ({elapsed / 60:.1f} min)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "vocoder",
        help="train the frame-rate iSTFT vocoder on the teacher's recordings",
        description=__doc__.split("\n\n")[0] + " Run it in the background with nice -n 10; "
        "rerunning the same command resumes. See training/vocoder.py.",
    )
    p.add_argument("--run", default="istft", help="run name (directory under runs/vocoder)")
    p.add_argument("--data", default="", metavar="DIR[,DIR]",
                   help="data directories (default $VOICEPIPE_HOME/data/tts and "
                   "data/tts_domain)")  # fmt: skip
    p.add_argument("--q", type=int, default=4, help="codec levels the mels are decoded from")
    p.add_argument("--channels", type=int, default=256)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--batch", type=int, default=16, help="crops per step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--heldout", type=int, default=20, help="held-out utterances for the loss")
    add_run_args(p, minutes=60.0, ckpt_min=3.0, snapshot_min=10.0)
    p.add_argument(
        "--export",
        default="",
        metavar="CKPT",
        help="write CKPT's model (fp16) to models/vocoder-hibari (or --out) and exit",
    )
    p.add_argument("--out", default="", metavar="DIR", help="with --export: write here instead")
    p.set_defaults(func=train)
