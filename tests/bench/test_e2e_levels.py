"""`voicepipe bench e2e` under load: levels, batches, stagger, per-level figures, plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicepipe.bench.e2e_levels import (
    batches,
    level_summary,
    llm_usage,
    offsets,
    parse_levels,
    plot,
    union_ms,
)
from voicepipe.tracing import SpanRecord


def test_levels_from_a_top_or_a_list() -> None:
    assert parse_levels("8") == [1, 2, 4, 8]
    assert parse_levels(6) == [1, 2, 4, 6]
    assert parse_levels("1,2,4,8,12") == [1, 2, 4, 8, 12]
    assert parse_levels("12,1,4,4") == [1, 4, 12]
    for bad in ("0", "0,2", ","):
        with pytest.raises(ValueError, match="--concurrency"):
            parse_levels(bad)


def test_batches_ask_every_question_and_repeat_when_sessions_outnumber_them() -> None:
    assert batches(8, 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert batches(8, 3) == [[0, 1, 2], [3, 4, 5], [6, 7, 0]]
    assert batches(8, 12) == [[0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]]
    assert batches(8, 1) == [[i] for i in range(8)]


def test_offsets_are_seeded_within_the_window_and_start_at_zero() -> None:
    a = offsets(8, 1.0, seed=3)
    assert a == offsets(8, 1.0, seed=3) and a != offsets(8, 1.0, seed=4)
    assert a[0] == 0.0 and all(0.0 <= x < 1.0 for x in a) and len(set(a)) == 8
    assert offsets(4, 0.0, seed=1) == [0.0] * 4
    assert offsets(1, 1.0, seed=1) == [0.0]


def test_union_of_decoding_windows() -> None:
    assert union_ms([]) == 0.0
    assert union_ms([[0, 10], [5, 20], [30, 40]]) == 30.0
    assert union_ms([[0, 50], [10, 20]]) == 50.0


def _span(name: str, start_ms: float, dur_ms: float, turn: int = 1, **attrs) -> SpanRecord:
    return SpanRecord(name, int(start_ms * 1e6), int((start_ms + dur_ms) * 1e6), turn, "s", attrs)


def test_llm_usage_and_level_summary() -> None:
    a = [
        _span("llm.ttft", 100, 40),
        _span("llm.tpot", 150, 8, tokens=20, decode_ms=160.0),
    ]
    b = [
        _span("llm.ttft", 200, 60),
        _span("llm.tpot", 270, 10, tokens=10, decode_ms=100.0),
    ]
    ua, ub = llm_usage(a), llm_usage(b)
    assert ua == {"tokens": 20, "windows_ms": [[100.0, 300.0]]}
    assert ub["windows_ms"] == [[200.0, 360.0]]
    sessions = [
        {
            "latency_ms": {"llm.ttft": 40.0, "llm.tpot": 8.0},
            "llm": ua,
            "jitter": {"played_ms": 900.0, "concealed_ms": 9.0},
        },
        {
            "latency_ms": {"llm.ttft": 60.0, "llm.tpot": 10.0},
            "llm": ub,
            "jitter": {"played_ms": 100.0, "concealed_ms": 1.0},
        },
    ]
    s = level_summary(sessions, cpu_s=12.345)
    assert s["llm_tokens"] == 30
    assert s["llm_tok_s"] == pytest.approx(30 / 0.26, abs=0.1)  # windows 100-360 ms
    assert s["concealed_pct"] == 1.0
    assert s["ttft_ms"]["p50"] == 50.0 and s["server_cpu_s"] == 12.35
    assert level_summary([{"latency_ms": {}}])["llm_tok_s"] is None


def test_plot_writes_a_png(tmp_path: Path) -> None:
    lv = [
        {
            "concurrency": c,
            "voice_to_voice_ms": {"p50": 500.0 * c, "p95": 600.0 * c, "p99": 700.0 * c},
        }
        for c in (1, 2, 4)
    ]
    out = tmp_path / "lat.png"
    plot(
        {"pipeline": "assistant", "variants": {"a": {"levels": lv}, "b": {"levels": lv}}}, str(out)
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plot(
        {"pipeline": "assistant", "levels": lv + [{"concurrency": 8, "voice_to_voice_ms": {}}]},
        str(out),
    )
    assert out.stat().st_size > 1000
