"""`voicepipe train tts-export`: training checkpoints → committed fp16 model + manifest + loss PNG.

Writes models/<name>/{target,draft,duration}.pt (fp16 state dicts), config.json
(model arguments and provenance), loss.png (loss curves from the runs'
loss.jsonl), and models/<name>.toml with the sha256 of every file. The model
card (models/<name>/README.md) is written by hand from the benchmark figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from voicepipe.registry import REPO_ROOT, sha256_file


def _fp16(state: dict) -> dict:
    return {k: (v.half() if v.is_floating_point() else v) for k, v in state.items()}


def loss_plot(runs: list[Path], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 3.6), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        recs = [json.loads(x) for x in (run / "loss.jsonl").read_text().splitlines() if x.strip()]
        keys = sorted({k for r in recs for k in r if "." in k and "loss" in k or "ce" in k})
        for k in keys:
            xs = [r["elapsed_s"] / 60 for r in recs if k in r]
            ys = [r[k] for r in recs if k in r]
            w = max(1, len(ys) // 100)  # moving average so the trend is readable
            sm = [
                sum(ys[max(0, i - w) : i + 1]) / len(ys[max(0, i - w) : i + 1])
                for i in range(len(ys))
            ]
            ax.plot(xs, sm, label=k)
        ax.set(
            xlabel="wall-clock minutes (2 shared CPU cores)",
            ylabel="train loss (LM: cross-entropy, nats; duration: MSE of log(1+units))",
            title=f"{run.name}: {len(recs)} steps",
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def export(lm_ckpt: Path, dur_ckpt: Path | None, name: str, description: str) -> Path:
    """``dur_ckpt`` None: keep the duration predictor already in models/<name>/ (a new
    codec LM over the same alignment)."""
    import torch

    out = REPO_ROOT / "models" / name
    out.mkdir(parents=True, exist_ok=True)
    lm = torch.load(lm_ckpt, map_location="cpu", weights_only=False)
    parts = {"target": lm["models"]["target"], "draft": lm["models"]["draft"]}
    if dur_ckpt is not None:
        du = torch.load(dur_ckpt, map_location="cpu", weights_only=False)
        parts["duration"] = du["models"]["duration"]
        dur_args, dur_step = du["args"]["duration"], du["step"]
    else:
        kept = json.loads((out / "config.json").read_text())
        if not (out / "duration.pt").exists():
            raise SystemExit(f"no {out / 'duration.pt'} to keep: give --duration")
        dur_args, dur_step = kept["duration"], kept["provenance"]["duration_step"]
    for k, state in parts.items():
        torch.save(_fp16(state), out / f"{k}.pt")
    cfg = {
        "target": lm["args"]["target"],
        "draft": lm["args"]["draft"],
        "duration": dur_args,
        "provenance": {
            "lm_step": lm["step"],
            "lm_minutes": round(lm["elapsed"] / 60, 1),
            "duration_step": dur_step,
            "lm_ckpt": lm_ckpt.name,
        },
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    runs = [lm_ckpt.parent] + ([dur_ckpt.parent] if dur_ckpt is not None else [])
    loss_plot(runs, out / "loss.png")
    files = ["target.pt", "draft.pt", "duration.pt", "config.json"]
    lines = [
        f'name = "{name}"',
        'role = "tts"',
        "default = true",
        'license = "Apache-2.0"',
        f"description = {json.dumps(description)}",
        'card = "models/' + name + '/README.md"',
        "",
    ]
    for f in files:
        lines += [
            "[[files]]",
            f'dest = "{f}"',
            f'sha256 = "{sha256_file(out / f)}"',
            f'parts = [{{ repo_path = "models/{name}/{f}" }}]',
            "",
        ]
    manifest = REPO_ROOT / "models" / f"{name}.toml"
    manifest.write_text("\n".join(lines))
    return manifest


def _handler(args: argparse.Namespace) -> int:
    desc = (
        "voicepipe codec LM TTS trained on hibari (heart voice) speech: target codec LM, "
        "small draft for speculative decoding, duration predictor. Predicts MelVQ "
        "(melvq-hibari) codes; see models/codec-lm-hibari/README.md."
    )
    m = export(Path(args.lm), Path(args.duration) if args.duration else None, args.name, desc)
    print(f"tts-export: wrote {m} and models/{args.name}/")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tts-export",
        help="export TTS checkpoints as committed fp16 weights + manifest + loss curve",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--lm", required=True, help="codec-LM checkpoint (runs/tts/RUN/stepN.pt)")
    p.add_argument(
        "--duration",
        default="",
        help="duration-predictor checkpoint (default: keep the one in models/NAME)",
    )
    p.add_argument("--name", default="codec-lm-hibari")
    p.set_defaults(func=_handler)
