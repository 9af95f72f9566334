"""`train tts` reads every training row of its data directories, or says which it cannot.

It once read 7,671 of the domain corpus's 8,250 rows without a word: it was started
while `tts-data --codes-only` was still encoding, and rows whose codes/ID.npy did
not exist yet were dropped (docs/benchmarks/tts.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from voicepipe.nn.tts.phonemes import n_frames_for
from voicepipe.training.tts import load_all, load_utterances


def _corpus(root: Path, ids: list[str], encoded: list[str], split: str = "train") -> None:
    (root / "codes").mkdir(parents=True, exist_ok=True)
    with open(root / "manifest.jsonl", "a", encoding="utf-8") as f:
        for i, uid in enumerate(ids):
            durations = [6, 3 + i, 4, 8]
            row = {"id": uid, "text": f"row {uid}", "split": split, "wav": f"wav/{uid}.wav",
                   "phonemes": [0, 12 + i, 40, 0], "durations": durations,
                   "n_samples_24k": sum(durations) * 600}  # fmt: skip
            f.write(json.dumps(row) + "\n")
            if uid in encoded:
                codes = np.full((n_frames_for(durations), 8), i, np.int16)
                np.save(root / "codes" / f"{uid}.npy", codes)


def test_rows_without_codes_are_named_not_silently_dropped(tmp_path: Path) -> None:
    base, domain = tmp_path / "base", tmp_path / "domain"
    _corpus(base, ["tr0", "tr1"], encoded=["tr0", "tr1"])
    _corpus(base, ["ho0"], encoded=[], split="heldout")  # held out: never a training row
    _corpus(domain, ["d0", "d1", "d2", "d3"], encoded=["d0", "d1"])  # encoder still running
    missing: list[str] = []
    rows = load_utterances(domain, 4, missing=missing)
    assert [r["id"] for r in rows] == ["d0", "d1"] and missing == ["d2", "d3"]
    assert rows[1]["codes"].shape == (n_frames_for([6, 4, 4, 8]), 4)
    with pytest.raises(SystemExit, match=r"2 training rows have no codes.*d2, d3"):
        load_all(base, str(domain), 4, need_codes=True)
    partial = load_all(base, str(domain), 4, need_codes=True, allow_missing=True)
    assert [r["id"] for r in partial] == ["tr0", "tr1", "d0", "d1"]
    # The duration predictor needs no codes: every training row, codes or not.
    assert len(load_all(base, str(domain), 4, need_codes=False)) == 6
    for i in (2, 3):  # the encoder finishes
        np.save(domain / "codes" / f"d{i}.npy", np.zeros((n_frames_for([6, 3 + i, 4, 8]), 8)))
    assert [r["id"] for r in load_all(base, str(domain), 4, need_codes=True)] == [
        "tr0",
        "tr1",
        "d0",
        "d1",
        "d2",
        "d3",
    ]


def test_init_states_from_the_shipped_model_and_from_a_checkpoint(tmp_path: Path) -> None:
    """--init: fine-tuning starts from the shipped codec LM's exact weights."""
    import torch

    from voicepipe.nn.tts.codec_lm import CodecLM, ModelArgs
    from voicepipe.registry import REPO_ROOT
    from voicepipe.training.tts import init_states

    shipped = REPO_ROOT / "models" / "codec-lm-hibari"
    init = init_states(shipped)
    assert set(init["models"]) == {"target", "draft", "duration"}
    target = CodecLM(ModelArgs(**init["args"]["target"]))
    target.load_state_dict(init["models"]["target"])  # strict: every tensor, right shapes
    fp16 = torch.load(shipped / "target.pt", map_location="cpu")
    assert all(v.dtype == torch.float32 for v in init["models"]["target"].values())
    torch.testing.assert_close(target.head0.weight, fp16["head0.weight"].float())
    # A training checkpoint (runs/tts/RUN/latest.pt) gives the same.
    ck = {"models": {"target": target.state_dict()}, "args": {"target": target.args.to_dict()}}
    torch.save(ck, tmp_path / "latest.pt")
    again = init_states(tmp_path / "latest.pt")
    assert again["args"]["target"] == init["args"]["target"]
    torch.testing.assert_close(again["models"]["target"], init["models"]["target"])
