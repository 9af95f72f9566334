"""`voicepipe bench jitter` runs and reports what docs/benchmarks/jitter.md quotes."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_jitter_simulated_json() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "voicepipe.cli",
            "bench",
            "jitter",
            "--no-real",
            "--seconds",
            "12",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    sc = report["scenarios"]
    assert set(sc) == {"clean", "jitter_40pm20", "stall_250_every_5s"}
    assert sc["clean"]["simulated"]["underruns"] == 0
    j = sc["jitter_40pm20"]["simulated"]
    assert j["underruns"] == 0 and j["played_ms"] == 12000
    assert j["delay_ms_mean"] <= 80
    s = sc["stall_250_every_5s"]["simulated"]
    assert s["stalls"] == 2 and len(s["recovery_ms"]) == 2
    assert s["stalls_not_recovered_within_2s"] == 0
    assert "real" not in sc["jitter_40pm20"]
