"""`voicepipe bench draft` and `bench replay` run and report what docs/benchmarks/llm.md quotes."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.profile import FAST_TOML
from voicepipe.nn.kernels import llama_step

FAST = str(FAST_TOML)


def _bench(*args: str) -> dict:
    proc = subprocess.run(
        # The 135M and its draft (configs/fast.toml): what these rows measure.
        [sys.executable, "-m", "voicepipe.cli", "bench", *args, "--json", "--config", FAST],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_bench_draft_weighs_the_draft_tree_against_the_chain() -> None:
    r = _bench("draft", "--engine", "--threads", "1", "--n", "3", "--max-new", "48",
               "--drafters", "ngram+smollm2-draft", "--siblings", "0.05,off")  # fmt: skip
    rows = r["drafters"]
    tree, chain = (
        rows["ngram+smollm2-draft siblings=0.05"],
        rows["ngram+smollm2-draft siblings=off"],
    )
    for row in (tree, chain):
        assert row["identical"] == "3/3" and row["tokens"] == r["plain"]["tokens"]
    assert chain["siblings"] == chain["sibling_hits"] == 0
    if llama_step() is None:  # trees are verified by the fused kernel only (AVX2 or AVX-512)
        assert tree["siblings"] == 0
        return
    assert tree["siblings"] > 0 and 0 < tree["sibling_hits"] <= tree["steps"]


def test_bench_draft_runs_with_and_without_the_reply_store() -> None:
    r = _bench("draft", "--engine", "--threads", "1", "--n", "3", "--max-new", "48",
               "--drafters", "ngram+smollm2-draft", "--store", "on,off")  # fmt: skip
    on, off = (
        r["drafters"]["ngram+smollm2-draft store=on"],
        r["drafters"]["ngram+smollm2-draft store=off"],
    )
    for row in (on, off):
        assert row["identical"] == "3/3" and row["tokens"] == r["plain"]["tokens"]
    assert off["store_steps"] == 0 < on["store_steps"] <= on["steps"]


def test_bench_replay_prices_the_engines_tree_and_the_chain() -> None:
    r = _bench("replay", "--n", "3", "--max-new", "48")
    pol = r["policies"]
    assert {
        "hybrid",
        "hybrid_chain",
        "eagle",
        "eagle_chain",
        "hybrid_tree_0.15_second_only",
        "hybrid_no_store",
        "hybrid_store_path_0.9",
    } <= set(pol)
    tokens = {p["tokens"] for p in pol.values()}
    assert len(tokens) == 1  # every policy replays the same replies
    # The runner-ups cost rows, never passes: the tree needs no more passes than the
    # chain (exact counts; the pass costs are timed, so they are not compared here).
    assert pol["eagle"]["passes"] <= pol["eagle_chain"]["passes"]
    assert r["first_guess"]["eagle_by_confidence"]
    assert sum(n for n, _ in r["first_guess"]["store_by_share"].values()) > 0  # the store traced
    # The oracles bound every policy: no rule over the same sites runs fewer passes, and
    # the draft alone can do no better than every source together.
    for name, p in pol.items():
        assert pol["oracle"]["passes"] <= p["passes"], name
    assert pol["oracle"]["passes"] <= pol["oracle_draft"]["passes"] <= pol["eagle_chain"]["passes"]
    model = r["chain_model"]
    assert 0 < model["first_guess"] < 1 and model["speedup_at_first_guess"] > 0
    needed = model["agreement_needed"]
    assert set(needed) == {"1.5", "1.8", "2.2"} and needed["1.5"] <= needed["1.8"] <= needed["2.2"]
