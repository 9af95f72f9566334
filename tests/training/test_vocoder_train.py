"""`voicepipe train vocoder` on a two-utterance corpus: crops line mels up with their
samples, the losses fall when the model fits a batch, and a run checkpoints, resumes
and exports a model the codec loads."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from voicepipe.audio import write_wav
from voicepipe.nn.tts.codec import MelVQCodec, load_vocoder
from voicepipe.nn.vocoder.istft_stream import IstftRunner
from voicepipe.nn.vocoder.istft_vocoder import SILENCE, IstftArgs, IstftVocoder
from voicepipe.training import vocoder as tv
from voicepipe.training.vocoder_loss import spectral_losses, total


def _corpus(root: Path) -> None:
    """Two 'utterances' (vowel-like harmonic tones), their codes from the real codec."""
    codec = MelVQCodec.load("melvq-hibari", q=4)
    (root / "codes").mkdir(parents=True)
    rows = []
    for i, (f0, secs, split) in enumerate([(140.0, 1.3, "train"), (190.0, 0.9, "heldout")]):
        t = np.arange(int(secs * 22050)) / 22050
        wave = sum(0.3 / k * np.sin(2 * np.pi * f0 * k * t) for k in range(1, 8)).astype(np.float32)
        write_wav(root / "wav" / f"u{i}.wav", wave, 22050)
        np.save(root / "codes" / f"u{i}.npy", codec.encode_all(wave).numpy().astype(np.int16))
        rows.append({"id": f"u{i}", "split": split, "wav": f"wav/u{i}.wav"})
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("voc") / "data"
    _corpus(root)
    return root


def test_rows_and_crops_line_mels_up_with_their_samples(corpus: Path) -> None:
    (row,) = tv.load_rows([corpus], "train", 4)
    frames = row["mel"].shape[1]
    assert row["wave"].shape == (frames * 256,)
    mel, y = tv.crop(row, -10)  # starts before the utterance: silence in, zeros out
    assert mel.shape == (80, tv.CTX_L + tv.CROP + tv.CTX_R)
    assert torch.all(mel[:, : tv.CTX_L + 10] == SILENCE) and torch.all(y[: 10 * 256] == 0)
    assert torch.equal(y[10 * 256 :], row["wave"][: (tv.CROP - 10) * 256].float() / 32767.0)
    assert torch.equal(mel[:, tv.CTX_L + 10 : tv.CTX_L + 12], row["mel"][:, :2].float())


def test_the_losses_fall_as_the_model_fits_a_batch(corpus: Path) -> None:
    rows = tv.load_rows([corpus], "train", 4)
    torch.manual_seed(0)
    model = IstftVocoder(IstftArgs(channels=32, blocks=2))
    mels, y = tv.batch(rows, 2, random.Random(0))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = None
    for _ in range(40):
        terms = spectral_losses(tv.scored(model, mels), y)
        loss = total(terms)
        first = first if first is not None else {k: float(v.detach()) for k, v in terms.items()}
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        last = {k: float(v) for k, v in spectral_losses(tv.scored(model, mels), y).items()}
    assert last["mag"] < 0.8 * first["mag"] and last["mel"] < 0.8 * first["mel"]


def test_a_run_checkpoints_resumes_and_exports(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICEPIPE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # the export goes to ./models/vocoder-hibari
    parser = argparse.ArgumentParser()
    tv.register(parser.add_subparsers())
    argv = ["vocoder", "--run", "t", "--data", str(corpus), "--channels", "16", "--blocks", "2",
            "--batch", "2", "--threads", "1"]  # fmt: skip
    args = parser.parse_args([*argv, "--max-steps", "3"])
    assert args.func(args) == 0
    run = tmp_path / "home" / "runs" / "vocoder" / "t"
    assert torch.load(run / "latest.pt", weights_only=False)["step"] == 3
    args = parser.parse_args([*argv, "--max-steps", "5"])  # the same command goes on
    assert args.func(args) == 0
    assert (run / "step5.pt").exists()
    args = parser.parse_args(["vocoder", "--export", str(run / "step5.pt")])
    assert args.func(args) == 0
    runner = load_vocoder(str(tmp_path / "models" / "vocoder-hibari"))
    assert isinstance(runner, IstftRunner) and runner.model.args == IstftArgs(16, 2)
    assert runner(torch.full((80, 12), SILENCE)).shape == (12 * 256,)
