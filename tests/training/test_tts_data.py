"""tts-data on a tiny corpus: manifest rows, 22,050 Hz WAVs, durations matching audio, resume."""

from __future__ import annotations

from pathlib import Path

from voicepipe.audio import read_wav
from voicepipe.nn.tts.phonemes import align, n_frames_for
from voicepipe.training.tts_data import generate, read_manifest


def test_generate_is_incremental_and_consistent(tmp_path: Path) -> None:
    assert generate(tmp_path, n_train=3, n_heldout=2, seed=5, limit=3) == 3
    rows = read_manifest(tmp_path)
    assert [r["split"] for r in rows] == ["heldout", "heldout", "train"]
    assert generate(tmp_path, n_train=3, n_heldout=2, seed=5) == 2  # resumes, no duplicates
    rows = read_manifest(tmp_path)
    assert len({r["id"] for r in rows}) == 5
    for r in rows:
        wave, sr = read_wav(tmp_path / r["wav"])
        assert sr == 22050
        assert sum(r["durations"]) * 600 == r["n_samples_24k"]
        assert abs(len(wave) - r["n_samples_24k"] * 22050 / 24000) <= 2
        assert len(r["phonemes"]) == len(r["durations"])
        al = align(r["durations"])
        assert al.n_frames == n_frames_for(r["durations"]) == -(-len(wave) // 1024)
