"""`bench llm --peer llamacpp`'s verify curve: llama.cpp, on the same GGUF, times one
pass over T rows with every row's logits, the cache rolled back between passes.
llama-cpp-python is not a dependency (it builds llama.cpp from source), so CI skips."""

from __future__ import annotations

import pytest

from voicepipe.nn.llm.engine import gguf_path

pytest.importorskip("llama_cpp")


def test_peer_row_has_a_verify_curve() -> None:
    from voicepipe.bench.llm_peer import llamacpp_row

    name = "smollm2-135m"
    if not gguf_path(name).is_file():
        pytest.skip(f"{gguf_path(name)} not pulled")
    ids = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    row = llamacpp_row(name, ids, n=2, repeats=1, threads=1, verify_rows=(1, 2, 4))
    assert "error" not in row, row
    assert set(row["verify_ms"]) == {"1", "2", "4"}  # (keys are strings once through JSON)
    assert all(v > 0 for v in row["verify_ms"].values())
    assert row["verify_cost"]["1"] == 1.0
    assert row["decode_tok_s"] > 0


def test_interleaved_row_reads_the_memory_rate_each_round() -> None:
    from voicepipe.bench.llm_peer import interleaved_row
    from voicepipe.nn.llm import llama

    name = "smollm2-135m"
    if not gguf_path(name).is_file():
        pytest.skip(f"{gguf_path(name)} not pulled")
    m, _ = llama.load(gguf_path(name), "int4", max_len=256, threads=1)
    row = interleaved_row(m, name, [1, 2, 3, 4, 5, 6, 7, 8], rounds=2, threads=1)
    assert "error" not in row, row
    assert row["tokens"] == 16 and len(row["rounds"]) == 2
    fused = m.kernel == "llama_step"  # (the rate is read by the fused kernel's team)
    for r in row["rounds"]:
        assert r["read_gb_s"] > 0 if fused else r["read_gb_s"] is None
        assert r["ours_ms"] > 0 and r["theirs_ms"] > 0
