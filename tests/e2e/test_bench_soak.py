"""`voicepipe bench soak` and `bench hostile` run end to end (model-free parrot pipeline)
and report what docs/benchmarks/server.md quotes; the figures themselves come from the
assistant pipeline in the benchmarks, never from tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

VOICEPIPE = [sys.executable, "-m", "voicepipe.cli"]


def test_bench_soak_reports_rss_fds_and_windows(tmp_path: Path) -> None:
    png = tmp_path / "soak.png"
    proc = subprocess.run(
        [
            *VOICEPIPE,
            "bench",
            "soak",
            "--pipeline",
            "parrot",
            "--minutes",
            "0.25",
            "--sessions",
            "2",
            "--sample-s",
            "2",
            "--window-min",
            "0.1",
            "--plot",
            str(png),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["failed"] == 0 and out["sessions"] >= 2
    assert len(out["samples"]) >= 5 and all(
        s["rss_mb"] > 0 and s["fds"] > 0 for s in out["samples"]
    )
    assert out["rss_mb"]["after_warmup"] > 0 and "growth_after_warmup" in out["rss_mb"]
    assert sum(w["sessions"] for w in out["windows"]) == out["sessions"]
    assert png.stat().st_size > 10_000


def test_bench_hostile_closes_every_attacker_and_keeps_the_honest_session() -> None:
    proc = subprocess.run(
        [*VOICEPIPE, "bench", "hostile", "--pipeline", "parrot", "--questions", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["alone"]["failed"] == 0 and out["under_attack"]["failed"] == 0
    assert out["same_transcript_and_reply"] == 1
    closes = out["hostile_closes"]
    assert closes["idle:4008"] == 8 and closes["playback:1002"] == 1
    assert closes["garbage:1002"] == 2 and closes["garbage:1009"] == 1
    assert not any(k.startswith("client_error") for k in closes), closes
