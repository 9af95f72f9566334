"""What the wall-clock-budgeted trainers (`train tts`, `train vocoder`) share: their run
options, their learning-rate schedule and how they write a checkpoint.

Both run for hours in the background on the two cores, resume from ``latest.pt`` when
the same command is run again, and decay the learning rate over the budget in minutes
rather than over a step count (a shared machine's step rate is not known beforehand).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any


def add_run_args(
    p: argparse.ArgumentParser, *, minutes: float, ckpt_min: float, snapshot_min: float
) -> None:
    """--minutes, --max-steps, --threads, --seed, --ckpt-min, --snapshot-min."""
    p.add_argument("--minutes", type=float, default=minutes, help="wall-clock budget (LR schedule)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: budget only)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--ckpt-min", type=float, default=ckpt_min, help="minutes between latest.pt saves"
    )
    p.add_argument(
        "--snapshot-min", type=float, default=snapshot_min, help="minutes between snapshots"
    )


def lr_at(elapsed_s: float, budget_s: float, base: float, warm_s: float = 120.0) -> float:
    """Linear warm-up over ``warm_s``, then a cosine from ``base`` to a tenth of it at the
    end of the budget (a resumed run with a larger budget restarts higher on the curve)."""
    if elapsed_s < warm_s:
        return base * max(0.05, elapsed_s / warm_s)
    frac = min(1.0, (elapsed_s - warm_s) / max(1.0, budget_s - warm_s))
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def save_atomic(obj: Any, path: Path) -> None:
    """torch.save through a temporary file: a run killed mid-write keeps its last checkpoint."""
    import torch

    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    tmp.replace(path)
