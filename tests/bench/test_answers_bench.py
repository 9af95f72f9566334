"""`voicepipe bench answers` end to end on the fast profile's 135M model (a few items)."""

from __future__ import annotations

import json

import pytest

from tests.profile import FAST_TOML
from voicepipe.bench.answers import SET_PATH, load_set
from voicepipe.cli import main


def test_bench_answers_scores_two_turn_items_through_the_stage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = main(["bench", "answers", "--category", "followups", "--n", "2", "--json",
               "--config", str(FAST_TOML), "--llm.max_new_tokens=24"])  # fmt: skip
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["set"]["items"] == 2 and out["set"]["turns"] == 4
    (row,) = out["models"]
    assert row["model"] == "smollm2-135m" and row["drafter"] == "ngram+smollm2-draft"
    assert row["total"] == 2 and set(row["by_category"]) == {"followups"}
    assert row["replies"] == 4 and row["decode_tok_s"] > 0
    assert row["ttft_ms_first_turn"] > 0 and row["ttft_ms_followup"] > 0
    assert 0 < row["mean_reply_tokens"] <= 24
    # Every pass counted (the 135M drafts: more than one token per pass on average).
    assert row["target_passes"] == sum(sum(i["target_passes"]) for i in row["items"]) > 0
    assert 1.0 <= row["tokens_per_pass"] <= 24
    checks = {i.id: i.check for i in load_set(SET_PATH).items}
    for item in row["items"]:
        first, second = item["replies"]
        assert first.strip() and second.strip()
        # The verdict is the set's check on the reply to the last turn.
        assert item["pass"] == checks[item["id"]].passes(second)
        # The second turn's prompt holds the first exchange: the stage's memory, under the
        # configured system prompt (which alone is longer than a short question).
        p1, p2 = item["prompt_tokens"]
        assert p2 > p1 + item["tokens"][0]
        assert p1 > 20


def test_bench_answers_names_a_missing_category(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "answers", "--category", "nope", "--json"]) == 2
    assert "unknown categories" in capsys.readouterr().err
