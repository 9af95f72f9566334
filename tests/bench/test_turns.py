"""bench turns without a server: the committed set loads, and the summary counts right."""

from __future__ import annotations

from voicepipe.bench import turns_set, turns_tuning
from voicepipe.bench.turns import summarize


def test_the_committed_set_has_every_kind_at_16_khz() -> None:
    clips = turns_set.load()
    kinds = {c.kind for c in clips}
    assert kinds == {"complete", "paused", "question", "backchannel", "interruption"}
    for c in clips:
        assert c.pcm.dtype.name == "float32" and len(c.pcm) > turns_set.SR // 10, c.name
        assert abs(c.pcm).max() <= 1.0
        if c.kind == "paused":
            assert c.pauses_s and all(0.4 <= p <= 1.5 for p in c.pauses_s), c.name


def test_the_tuning_set_shares_no_sentence_or_voice_with_the_reported_one() -> None:
    """Numbers chosen on the tuning set are not fitted to the figures reported on the other."""
    tuning, bench = turns_tuning.load(), turns_set.load()
    assert {c.kind for c in tuning} == {"complete", "paused"}
    assert not {c.text for c in tuning} & {c.text for c in bench}
    assert not {c.voice for c in tuning} & {c.voice for c in bench}
    for c in tuning:
        assert c.pcm.dtype.name == "float32" and abs(c.pcm).max() <= 1.0
        if c.kind == "paused":
            assert c.pauses_s and all(0.4 <= p <= 1.5 for p in c.pauses_s), c.name


def test_summary_rates_and_delays() -> None:
    base = {"later_turns": [], "answered_later": 0, "verdicts": [], "error": ""}
    rows = [
        {"kind": "complete", "turns": 1, "eot_delay_ms": [400.0]},
        {"kind": "complete", "turns": 2, "eot_delay_ms": [500.0, 600.0]},
        {"kind": "paused", "turns": 2},
        {"kind": "paused", "turns": 1},
        # cut, the rest ended as a turn of its own but dropped (judged a backchannel)
        {
            "kind": "paused",
            "turns": 1,
            "finals": [{"text": "What is the capital on?"}, {"text": "Got it,"}],
        },
        {"kind": "paused", "turns": 1, "finals": [{"text": "Set a timer."}, {"text": ""}]},
        {"kind": "backchannel", "interrupted": False, **base, "unplayed_ms": 40.0},
        {"kind": "backchannel", "interrupted": False, **base, "answered_later": 1},
        {"kind": "interruption", "interrupted": True, "interrupt_ms": 300.0, **base},
        {"kind": "interruption", "interrupted": True, "interrupt_ms": 900.0, **base},
        {"kind": "interruption", "interrupted": False, "interrupt_ms": None, **base},
        {"kind": "echo", "user_talks": False, "interrupted": True, **base, "later_turns": ["x"]},
    ]
    s = summarize(rows)
    assert s["complete"]["eot_delay_ms_p50"] == 500.0 and s["complete"]["split_rate"] == 0.5
    assert s["paused"]["false_cutoff_rate"] == 0.5  # 2 of 4: an empty final is no turn
    assert s["backchannel"] == {
        "n": 2,
        "false_barge_in_rate": 0.5,
        "reply_went_on_rate": 1.0,
        "unplayed_ms_max": 40.0,  # audio of a resumed answer never played
    }
    i = s["interruption"]
    assert i["detected_rate"] == round(2 / 3, 3) and i["within_400ms_rate"] == round(1 / 3, 3)
    assert i["delay_ms_max"] == 900.0
    assert s["echo"]["self_interruption_rate"] == 1.0 and s["echo"]["echo_transcripts"] == 1


def test_a_bad_variant_fails_before_any_server_starts(monkeypatch) -> None:
    import argparse

    import pytest

    from voicepipe import config
    from voicepipe.bench import _serve
    from voicepipe.bench.turns import run

    def no_server(*a, **k):
        raise AssertionError("a server was started before the variants were checked")

    monkeypatch.setattr(_serve, "serve_process", no_server)

    args = argparse.Namespace(
        kind=["complete"], mode="after", config=config.Config(), config_file=None,
        reply_tokens=8, clip_set="bench", json=True,
        variant=["turns.p_end_model=", "turns.p_end_model=no-such-model"],
    )  # fmt: skip
    with pytest.raises(config.ConfigError, match="turns.p_end_model"):
        run(args)
