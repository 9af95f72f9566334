"""`voicepipe train tts-export` and `bench tts --ckpt` with a new codec LM over the
shipped duration predictor (no duration checkpoint given)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path


def test_export_without_a_duration_checkpoint_keeps_the_shipped_predictor(
    tmp_path: Path,
) -> None:
    import torch

    from voicepipe.nn.tts.codec_lm_decode import load_models, load_training_checkpoints
    from voicepipe.registry import REPO_ROOT
    from voicepipe.training.tts import init_states
    from voicepipe.training.tts_export import export

    shipped = REPO_ROOT / "models" / "codec-lm-hibari"
    init = init_states(shipped)
    run = tmp_path / "lm-run"
    run.mkdir()
    ck = {
        "models": {k: init["models"][k] for k in ("target", "draft")},
        "args": {k: init["args"][k] for k in ("target", "draft")},
        "step": 7,
        "elapsed": 120.0,
    }
    torch.save(ck, run / "step7.pt")
    (run / "loss.jsonl").write_text(json.dumps({"elapsed_s": 1.0, "target.loss": 3.0}) + "\n")

    # Evaluating the checkpoint: its LM, the shipped duration predictor.
    models = load_training_checkpoints(run / "step7.pt")
    want = load_models(shipped)
    torch.testing.assert_close(models.target.head0.weight, want.target.head0.weight)
    torch.testing.assert_close(next(models.duration.parameters()), next(want.duration.parameters()))

    name = f"test-export-{uuid.uuid4().hex[:8]}"
    out = REPO_ROOT / "models" / name
    manifest = REPO_ROOT / "models" / f"{name}.toml"
    try:
        out.mkdir(parents=True)
        for f in ("duration.pt", "config.json"):
            shutil.copy(shipped / f, out / f)
        before = (out / "duration.pt").read_bytes()
        export(run / "step7.pt", None, name, "test")
        cfg = json.loads((out / "config.json").read_text())
        assert (out / "duration.pt").read_bytes() == before  # kept as it was
        assert cfg["provenance"]["lm_step"] == 7
        old = json.loads((shipped / "config.json").read_text())
        assert cfg["duration"] == old["duration"]
        assert cfg["provenance"]["duration_step"] == old["provenance"]["duration_step"]
        assert {"target.pt", "draft.pt", "loss.png"} <= {p.name for p in out.iterdir()}
        assert "duration.pt" in manifest.read_text()
    finally:
        shutil.rmtree(out, ignore_errors=True)
        manifest.unlink(missing_ok=True)
