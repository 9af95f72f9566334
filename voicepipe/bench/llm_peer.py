"""The llama.cpp peer row of `voicepipe bench llm --peer llamacpp` (never in CI).

The same GGUF file, prompt and greedy decode loop as bench llm's model rows,
run by llama.cpp through llama-cpp-python, so both engines are measured in one
run on one machine. llama-cpp-python is not a dependency: it builds llama.cpp
from source (`pip install llama-cpp-python`, ~6 minutes here). On this
machine's VM the build's AMX code crashed in decode; `CMAKE_ARGS="-DGGML_NATIVE=OFF
-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"` builds without
it. Without the package the row says how to get it. The peer runs in a child
process with OpenMP's default wait policy: the CLI's OMP_WAIT_POLICY=PASSIVE
(right for voicepipe's few parallel regions per step) made llama.cpp, which
opens one per op, decode ~3x slower than it does as users run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def llamacpp_row(name: str, ids: list[int], n: int, repeats: int, threads: int) -> dict:
    """Load time, TTFT of prompt ``ids`` and greedy decode speed of ``n`` tokens."""
    from voicepipe.nn.llm.engine import gguf_path

    row: dict = {"model": name, "weights": "gguf", "kernel": "llama.cpp", "threads": threads}
    job = {"path": str(gguf_path(name)), "ids": ids, "n": n, "repeats": repeats}
    proc = subprocess.run(
        [sys.executable, "-m", "voicepipe.bench.llm_peer", str(threads)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"},
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        err = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        row["error"] = f"llama.cpp peer failed: {err}"
        return row
    row.update(json.loads(proc.stdout))
    return row


def _measure(job: dict, threads: int) -> dict:
    try:
        import numpy as np
        from llama_cpp import Llama
    except ImportError as e:
        return {"error": f"llama-cpp-python not installed ({e}): pip install llama-cpp-python"}
    ids, n, repeats = job["ids"], job["n"], job["repeats"]
    t0 = time.perf_counter()
    llm = Llama(
        model_path=job["path"],
        n_ctx=len(ids) + n + 16,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    row: dict = {"load_s": round(time.perf_counter() - t0, 2)}
    ttft, tpot = [], []
    for _ in range(repeats):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)  # keeps the logits of the last fed token in llm.scores
        nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        ttft.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(n):  # fixed length, as the model rows: no stop token
            llm.eval([nxt])
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        tpot.append((time.perf_counter() - t0) / n)
    best = min(tpot)
    row.update(
        prompt_tokens=len(ids),
        ttft_ms=round(min(ttft) * 1e3, 1),
        tpot_ms=round(best * 1e3, 2),
        decode_tok_s=round(1 / best, 1),
    )
    return row


if __name__ == "__main__":  # the child: a job on stdin, one JSON row out
    print(json.dumps(_measure(json.load(sys.stdin), int(sys.argv[1]))))
