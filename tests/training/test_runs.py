"""The trainers' shared schedule and checkpoint write (training/runs.py)."""

from __future__ import annotations

from pathlib import Path

import torch

from voicepipe.training.runs import lr_at, save_atomic


def test_lr_warms_up_then_decays_to_a_tenth_at_the_budget() -> None:
    base, budget = 1e-3, 3600.0
    assert lr_at(0.0, budget, base) == base * 0.05
    assert lr_at(60.0, budget, base) == base * 0.5
    assert lr_at(120.0, budget, base) == base
    lrs = [lr_at(t, budget, base) for t in range(120, 3601, 60)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:], strict=False))
    assert abs(lr_at(budget, budget, base) - 0.1 * base) < 1e-12
    assert lr_at(2 * budget, budget, base) == lr_at(budget, budget, base)


def test_save_atomic_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "latest.pt"
    save_atomic({"step": 1}, path)
    save_atomic({"step": 2}, path)
    assert torch.load(path, weights_only=True) == {"step": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["latest.pt"]
