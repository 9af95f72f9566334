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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the llama.cpp child imports this module: no torch at import)
    import torch


def llamacpp_row(
    name: str, ids: list[int], n: int, repeats: int, threads: int, verify_rows: tuple = ()
) -> dict:
    """Load time, TTFT of prompt ``ids``, greedy decode speed of ``n`` tokens and, given
    ``verify_rows``, the cost of a verifying pass over each of those row counts."""
    from voicepipe.nn.llm.engine import gguf_path

    row: dict = {"model": name, "weights": "gguf", "kernel": "llama.cpp", "threads": threads}
    job = {"path": str(gguf_path(name)), "ids": ids, "n": n, "repeats": repeats}
    job["verify_rows"] = list(verify_rows)
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
    del llm
    row.update(_verify_costs(job["path"], ids, threads, job.get("verify_rows", [])))
    return row


def _verify_costs(path: str, ids: list[int], threads: int, rows: list[int], passes: int = 12):
    """bench llm's verify_costs for llama.cpp: one pass over T rows with every row's
    logits (as a verifier needs them), best of ``passes``, interleaved over T, at the
    end of the prompt, the cache rolled back after each pass (``eval`` drops the cache
    past ``n_tokens``)."""
    if not rows:
        return {}
    from llama_cpp import Llama

    llm = Llama(
        model_path=path,
        n_ctx=len(ids) + max(rows) + 16,
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=True,
        verbose=False,
    )
    llm.eval(ids)
    base = llm.n_tokens
    best = dict.fromkeys(rows, float("inf"))
    for _ in range(passes):
        for t in rows:
            t0 = time.perf_counter()
            llm.eval(ids[-t:])
            best[t] = min(best[t], time.perf_counter() - t0)
            llm.n_tokens = base
    one = best[1]  # (the rows always hold 1: bench llm's VERIFY_ROWS)
    return {
        "verify_ms": {t: round(v * 1e3, 2) for t, v in best.items()},
        "verify_cost": {t: round(v / one, 2) for t, v in best.items()},
    }


def interleaved_row(m, name: str, ids: list[int], rounds: int, threads: int) -> dict:
    """Decode speed of model m and of llama.cpp on the same GGUF, alternating 8 tokens
    each for ``rounds`` rounds: on a shared machine both see the same load, so their
    ratio means something where two rows measured minutes apart do not.

    Each round also reads the host's memory rate first (``rounds``: its GB/s and each
    engine's median token there): a decode pass streams its weights, and on a VM the rate
    moved between ~36 and ~60 GB/s from one minute to the next, taking the ratio with it
    (docs/benchmarks/llm.md, Current)."""
    import torch

    from voicepipe.nn.llm import llama
    from voicepipe.nn.llm.engine import gguf_path

    row: dict = {"model": name, "kernel": f"{m.kernel} vs llama.cpp, interleaved"}
    row["threads"] = threads
    job = {"path": str(gguf_path(name)), "ids": ids}
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    cmd = [sys.executable, "-m", "voicepipe.bench.llm_peer", str(threads), "serve"]
    with subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    ) as p:
        assert p.stdin is not None and p.stdout is not None
        stdin, stdout = p.stdin, p.stdout

        def ask(cmd: object) -> Any:
            stdin.write(json.dumps(cmd) + "\n")
            stdin.flush()
            line = stdout.readline()
            if not line:
                raise RuntimeError("llama.cpp peer exited (is llama-cpp-python installed?)")
            return json.loads(line)

        try:
            ask(job)
            cache = m.new_cache(len(ids) + 16 * rounds + 8)
            nxt = int(llama.prefill(m, cache, ids).argmax())
            ours: list[float] = []
            theirs: list[float] = []
            per_round: list[dict] = []
            rate_buf = torch.ones(256 << 20, dtype=torch.uint8)  # one buffer for every round
            for _ in range(rounds):
                rate = _read_rate(threads, rate_buf)
                mine = []
                for _ in range(8):
                    t0 = time.perf_counter()
                    nxt = int(llama.decode_step(m, cache, nxt).argmax())
                    mine.append(time.perf_counter() - t0)
                peer = ask(8)
                ours += mine
                theirs += peer
                per_round.append(
                    {"read_gb_s": rate, "ours_ms": _median_ms(mine), "theirs_ms": _median_ms(peer)}
                )
        except (RuntimeError, ValueError) as e:
            row["error"] = str(e)
            return row
        finally:
            stdin.close()
    o, t = _median(ours), _median(theirs)
    row.update(
        tokens=len(ours),
        decode_tok_s_median=round(1 / o, 1),
        peer_tok_s_median=round(1 / t, 1),
        ratio_median=round(t / o, 2),
        ratio_best=round(min(theirs) / min(ours), 2),
        rounds=per_round,
    )
    return row


def _median(seconds: list[float]) -> float:
    """The upper median, as the row's ``decode_tok_s_median`` has always taken it."""
    return sorted(seconds)[len(seconds) // 2]


def _median_ms(seconds: list[float]) -> float:
    return round(_median(seconds) * 1e3, 2)


def _read_rate(threads: int, buf: torch.Tensor) -> float | None:
    """The host's read rate now (``buf``, 256 MiB, best of 3: ~20 ms), or None without the
    fused kernel that measures it."""
    from voicepipe.bench.llm_profile import read_gb_s

    try:
        return round(read_gb_s(threads, passes=3, buf=buf), 1)
    except ValueError:
        return None


def _serve(threads: int) -> None:
    """The child of interleaved_row: a job line, then per line N: decode N tokens greedily
    and answer their seconds."""
    import numpy as np
    from llama_cpp import Llama

    job = json.loads(sys.stdin.readline())
    llm = Llama(model_path=job["path"], n_ctx=2048, n_threads=threads,
                n_threads_batch=threads, verbose=False)  # fmt: skip
    llm.eval(job["ids"])
    nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    print(json.dumps("ready"), flush=True)
    for line in sys.stdin:
        times = []
        for _ in range(int(json.loads(line))):
            t0 = time.perf_counter()
            llm.eval([nxt])
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            times.append(time.perf_counter() - t0)
        print(json.dumps(times), flush=True)


if __name__ == "__main__":  # the child: a job on stdin, one JSON row out (or serve)
    if sys.argv[2:] == ["serve"]:
        _serve(int(sys.argv[1]))
    else:
        print(json.dumps(_measure(json.load(sys.stdin), int(sys.argv[1]))))
