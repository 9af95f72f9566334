"""Tracing: JSONL and Chrome export round trips, percentiles, summary order."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from voicepipe import tracing
from voicepipe.cli import main
from voicepipe.frames import SpanFrame


def _tracer() -> tracing.Tracer:
    tr = tracing.Tracer()
    for i in range(100):
        tr.record(
            "llm.ttft",
            1_000_000 * i,
            1_000_000 * i + (i + 1) * 1_000_000,
            turn_id=i,
            session="s1",
            tokens=3,
        )
    tr.add(SpanFrame(turn_id=1, name="asr.final", start_ns=0, end_ns=250_000_000), session="s2")
    tr.record("custom.thing", 0, 5_000_000)
    return tr


def test_percentile_matches_numpy() -> None:
    xs = [5.0, 1.0, 9.0, 3.0, 7.5, 2.25]
    for q in (0, 50, 95, 99, 100):
        assert tracing.percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))


def test_summary_orders_design_names_first() -> None:
    s = _tracer().summary()
    assert list(s) == ["asr.final", "llm.ttft", "custom.thing"]
    assert s["llm.ttft"]["count"] == 100
    assert s["llm.ttft"]["p50"] == pytest.approx(50.5)
    assert s["llm.ttft"]["p99"] == pytest.approx(99.01)
    assert s["asr.final"]["max"] == pytest.approx(250.0)


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_export_round_trip(tmp_path: Path, suffix: str) -> None:
    tr = _tracer()
    path = tr.save(tmp_path / f"trace{suffix}")
    assert path is not None
    back = tracing.load(path)
    assert sorted((s.name, s.turn_id, s.session, round(s.duration_ms, 3)) for s in back) == sorted(
        (s.name, s.turn_id, s.session, round(s.duration_ms, 3)) for s in tr.spans
    )
    again, before = tracing.summarize(back), tr.summary()
    assert list(again) == list(before)
    for name in before:
        assert again[name] == pytest.approx(before[name])


def test_chrome_format(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    _tracer().save(path)
    events = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert all({"name", "ts", "dur", "pid", "tid"} <= set(e) for e in spans)
    assert min(e["ts"] for e in spans) == 0
    threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"llm", "asr", "custom"} <= threads


def test_trace_summarize_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    _tracer().save(path)
    assert main(["trace", "summarize", str(path)]) == 0
    out = capsys.readouterr().out
    assert "llm.ttft" in out and "p95" in out
    assert main(["trace", "summarize", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["llm.ttft"]["count"] == 100
    assert main(["trace", "chrome", str(path), str(tmp_path / "c.json")]) == 0
    assert len(tracing.load(tmp_path / "c.json")) == 102
    assert main(["trace", "waterfall", str(path), str(tmp_path / "w"), "--turn", "1"]) == 0
    pngs = sorted(p.name for p in (tmp_path / "w").iterdir())
    assert pngs == ["s1-turn1.png", "s2-turn1.png"]
    assert (tmp_path / "w" / "s1-turn1.png").read_bytes()[:4] == b"\x89PNG"
    png = tmp_path / "waterfall.png"
    assert main(["trace", "plot", str(path), "--out", str(png), "--last", "3"]) == 0
    assert "3 turn(s)" in capsys.readouterr().out
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["trace", "plot", str(path), "--out", str(png), "--turn", "999"]) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert main(["trace", "summarize", str(bad)]) == 2
    assert "bad.jsonl" in capsys.readouterr().err


def test_tracer_keeps_the_newest_spans_only() -> None:
    tr = tracing.Tracer(max_spans=10)
    for i in range(25):
        tr.record("x", i, i + 1, turn_id=i)
    assert [s.turn_id for s in tr.snapshot()] == list(range(15, 25))
