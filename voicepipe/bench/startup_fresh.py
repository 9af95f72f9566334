"""`voicepipe bench startup --fresh-clone`: a fresh clone to a serving `make run`, timed.

What a new user does on a new machine: ``git clone`` this repository's committed
HEAD into a temporary folder, then ``make run`` with every cache cold (an empty pip
cache, ``$VOICEPIPE_HOME`` and kernel build folder), the server on a free port. Each
output line is time-stamped from the start; at the ``serving http://…`` line the
server is stopped (SIGINT) and the run reported:

  serving_s: clone start → the server's ``serving`` line (what the start-up goal counts)
  steps:     the first time each step showed: kernel compiles started / done, packing
             started / done, server listening, pipeline ready, with the seconds
             the lines themselves report
  lines:     every line with its time (--lines)

Needs network access to the package index (pip and the models' packages), like the
user's own first ``make run``. Takes minutes; use on an idle machine.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# (step name, pattern): the first line matching each marks the step.
STEPS = (
    ("kernel_compile_started", re.compile(r"voicepipe: compiling kernels/")),
    ("kernels_compiled", re.compile(r"kernels/llama_step/llama_step\.cpp compiled in")),
    ("packing_started", re.compile(r"voicepipe: packing \S+ \(")),
    ("packed", re.compile(r"packed weights cached in|: packed in \d+ s")),
    ("serve_started", re.compile(r"starting pipeline")),
    ("pipeline_ready", re.compile(r"pipeline \S+ ready in")),
    ("serving", re.compile(r"voicepipe: serving http")),
)


def fresh_clone_run(timeout_s: float = 1200.0, keep: bool = False, lines: bool = False) -> dict:
    if not (REPO / ".git").exists():
        raise SystemExit(f"voicepipe bench startup --fresh-clone: {REPO} is not a git checkout")
    root = Path(tempfile.mkdtemp(prefix="voicepipe-fresh-"))
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    env = os.environ | {
        "PIP_CACHE_DIR": str(root / "pip-cache"),
        "VOICEPIPE_HOME": str(root / "home"),
        "TORCH_EXTENSIONS_DIR": str(root / "torch-ext"),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("VIRTUAL_ENV", None)
    t0 = time.perf_counter()
    got: list[tuple[float, str]] = []
    steps: dict[str, float] = {}
    proc = None
    try:
        clone = root / "voicepipe"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        steps["cloned"] = round(time.perf_counter() - t0, 1)
        proc = subprocess.Popen(
            ["make", "run", "SERVE_ARGS=--port 0"], cwd=clone, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        assert proc.stdout is not None
        for line in proc.stdout:
            t = round(time.perf_counter() - t0, 1)
            line = line.rstrip()
            got.append((t, line))
            print(f"{t:7.1f} {line}", file=sys.stderr, flush=True)
            for name, pat in STEPS:
                if name not in steps and pat.search(line):
                    steps[name] = t
            if "serving" in steps:
                os.killpg(proc.pid, signal.SIGINT)
                break
            if t > timeout_s:
                break
        proc.wait(timeout=60)
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    report: dict = {
        "commit": head,
        "serving_s": steps.get("serving"),
        "steps": steps,
        "reported": _reported(got),
        "folder": str(root) if keep else None,
    }
    if lines:
        report["lines"] = [{"t": t, "line": ln} for t, ln in got]
    return report


def _reported(got: list[tuple[float, str]]) -> dict[str, float]:
    """The durations the lines state themselves: each kernel's compile, the packing, the
    pipeline's model loading."""
    out: dict[str, float] = {}
    for _, line in got:
        if m := re.search(r"kernels/(\S+?)\.cpp compiled in ([\d.]+) s", line):
            out[f"compile_{Path(m.group(1)).name}_s"] = float(m.group(2))
        elif m := re.search(r"into \w+: layer (\d+)/(\d+) \((\d+) s\)", line):
            if m.group(1) == m.group(2):
                out["pack_layers_s"] = float(m.group(3))
        elif m := re.search(r"pipeline \S+ ready in ([\d.]+) s", line):
            out["models_loaded_s"] = float(m.group(1))
        elif m := re.search(r"LLM \S+ ready \(([\d.]+) s\)", line):
            out["llm_loaded_s"] = float(m.group(1))
    return out
