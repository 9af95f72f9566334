"""The llama.cpp peer row of `voicepipe bench llm --peer llamacpp` (never in CI).

The same GGUF file, prompt and greedy decode loop as bench llm's model rows,
run by llama.cpp through llama-cpp-python, so both engines are measured in one
run on one machine. llama-cpp-python is not a dependency: it builds llama.cpp
from source (`pip install llama-cpp-python`, ~6 minutes here); without it the
row says how to get it.
"""

from __future__ import annotations

import time


def llamacpp_row(name: str, ids: list[int], n: int, repeats: int, threads: int) -> dict:
    """Load time, TTFT of prompt ``ids`` and greedy decode speed of ``n`` tokens."""
    row: dict = {"model": name, "weights": "gguf", "kernel": "llama.cpp", "threads": threads}
    try:
        import numpy as np
        from llama_cpp import Llama
    except ImportError as e:
        row["error"] = f"llama-cpp-python not installed ({e}): pip install llama-cpp-python"
        return row
    from voicepipe.nn.engine import gguf_path

    t0 = time.perf_counter()
    llm = Llama(
        model_path=str(gguf_path(name)),
        n_ctx=len(ids) + n + 16,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    row["load_s"] = round(time.perf_counter() - t0, 2)
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
