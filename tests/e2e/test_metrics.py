"""GET /metrics: Prometheus text format, fed by real sessions through a real server."""

from __future__ import annotations

import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_loopback import voice_like
from voicepipe import config
from voicepipe.client import run_sessions
from voicepipe.frames import ErrorFrame, MetricsFrame, SpanFrame
from voicepipe.server.app import Server
from voicepipe.server.metrics import ServerMetrics


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


async def test_metrics_count_sessions_spans_and_playout() -> None:
    cfg = config.load(None, ["jitter.min_delay_ms=20"])
    server = Server(cfg, pipeline="loopback", port=0)
    await server.start()
    try:
        pcm = voice_like(1.0, 16000)
        results = await run_sessions(
            server.ws_url, pcm, 16000, cfg, concurrency=2, speed=4.0, playout="adaptive"
        )
        assert all(r.to_json()["ok"] for r in results), [r.error for r in results]
        m = await asyncio.to_thread(_scrape, f"{server.url}metrics")
    finally:
        await server.close()
    assert m["voicepipe_sessions_total{}"] == 2
    assert m["voicepipe_sessions_active{}"] == 0
    # Every span the loopback pipeline sent is in its histogram, once per session.
    assert m["voicepipe_span_ms_count{name=loopback.echo}"] == 2
    assert m["voicepipe_span_ms_count{name=loopback.stream}"] == 2
    assert m["voicepipe_span_ms_bucket{le=+Inf,name=loopback.echo}"] == 2
    # The clients' playback reports reached the server (at least the first-play ones;
    # a final report may race the close), and never count more than the clients saw.
    assert m["voicepipe_playback_reports_total{}"] >= 2
    underruns = sum(r.jitter.get("underruns", 0) for r in results)
    assert 0 <= m["voicepipe_playout_total{counter=underruns}"] <= underruns


def test_playout_counters_are_running_totals_per_reply() -> None:
    sm = ServerMetrics()
    age = 10_000.0  # ms the session has existed: far above what these reports claim
    sm.playback("s1", 1, {"underruns": 1, "concealed_ms": 20.0}, done=False, age_ms=age)
    sm.playback("s1", 1, {"underruns": 3, "concealed_ms": 50.0}, done=True, age_ms=age)
    sm.playback("s2", 1, {"underruns": 2}, done=False, age_ms=age)
    sm.playback("s1", 2, {"underruns": 1}, done=False, age_ms=age)  # a new reply: from zero
    # A session cannot conceal more audio than it has existed, nor underrun more than
    # once a frame, however many turns it claims: s3 (1 s old) adds 1000 ms and 50 at most.
    for turn in range(5):
        sm.playback(
            "s3",
            turn,
            {"underruns": 1e9, "concealed_ms": 1e9},
            done=True,
            age_ms=1000.0,
            frame_ms=20.0,
        )
    sm.observe(ErrorFrame(code="stage_error", message="x"))
    sm.observe(MetricsFrame(source="llm", values={"drafted": 8, "accepted": 5}))
    sm.observe(SpanFrame(name="llm.ttft", start_ns=0, end_ns=42_000_000))
    for outcome in ("kept", "kept", "cancelled"):  # what the LLM stage sends per outcome
        sm.observe(MetricsFrame(source="preempt", values={outcome: 1}))
    m = {
        f"{s.name}{s.labels}": s.value
        for fam in text_string_to_metric_families(sm.render().decode())
        for s in fam.samples
    }
    assert m["voicepipe_playout_total{'counter': 'underruns'}"] == 6 + 50
    assert m["voicepipe_playout_total{'counter': 'concealed_ms'}"] == 50 + 1000
    assert m["voicepipe_playback_reports_total{}"] == 4 + 5
    assert m["voicepipe_errors_total{'code': 'stage_error'}"] == 1
    assert m["voicepipe_spec_drafted_tokens_total{'source': 'llm'}"] == 8
    assert m["voicepipe_spec_accepted_tokens_total{'source': 'llm'}"] == 5
    assert m["voicepipe_span_ms_sum{'name': 'llm.ttft'}"] == 42
    assert m["voicepipe_preempt_replies_total{'outcome': 'kept'}"] == 2
    assert m["voicepipe_preempt_replies_total{'outcome': 'cancelled'}"] == 1
    assert m["voicepipe_span_ms_bucket{'le': '50.0', 'name': 'llm.ttft'}"] == 1
    assert m["voicepipe_span_ms_bucket{'le': '25.0', 'name': 'llm.ttft'}"] == 0
