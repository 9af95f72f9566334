"""OpenTelemetry export end to end: a real spoken turn's spans reach an OTLP collector.

The test runs an OTLP/HTTP receiver on loopback (bench/otlp_sink.py: a plain HTTP server
decoding ``ExportTraceServiceRequest`` protobufs with opentelemetry-proto, as a collector
does),
points ``[trace] otlp_endpoint`` at it, and speaks a question to the assistant (fast
profile) through a real server and the headless client. The answered turn must arrive as
one trace: a root ``turn`` carrying session, turn, pipeline and model names, and its stage
spans (at least five, the waterfall's names) as its children, each within 5 ms of the
server's own JSON trace. The server writes its session and turn log lines meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.profile import fast
from voicepipe.audio import read_wav
from voicepipe.bench.otlp_sink import OtlpSink
from voicepipe.client import ClientSession
from voicepipe.server.app import Server
from voicepipe.tracing import SPAN_NAMES

CLIP = Path(__file__).resolve().parents[1] / "data" / "asr" / "utt11.wav"  # "Why is the sky blue?"
TOLERANCE_MS = 5.0


@pytest.fixture
def collector() -> Iterator[OtlpSink]:
    with OtlpSink() as sink:
        yield sink


def _attrs(kv: object) -> dict:
    out = {}
    for a in kv:  # type: ignore[attr-defined]
        v = a.value
        out[a.key] = getattr(v, v.WhichOneof("value"))
    return out


async def test_a_spoken_turn_arrives_as_one_trace(
    collector: OtlpSink, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = fast()
    endpoint = collector.url
    cfg = dataclasses.replace(cfg, trace=dataclasses.replace(cfg.trace, otlp_endpoint=endpoint))
    pcm, sr = read_wav(CLIP)
    server = Server(cfg, pipeline="assistant", port=0)
    caplog.set_level(logging.INFO, logger="voicepipe.sessions")
    await server.start()
    try:
        res = await ClientSession(
            server.ws_url, pcm, sr, cfg, timeout_s=120, trailing_silence_s=1.5
        ).run()
    finally:
        await server.close()  # flushes the exporter's queue
    out = res.to_json()
    assert out["ok"], out
    (turn,) = [t for t in out["turns"] if t["transcript"]]
    sid, turn_id = res.session_id, turn["turn_id"]

    assert collector.paths and set(collector.paths) == {"/v1/traces"}
    spans = [
        (rs.resource, s)
        for req in collector.requests
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    roots = [
        s
        for _, s in spans
        if s.name == "turn" and _attrs(s.attributes).get("voicepipe.turn_id") == turn_id
    ]
    assert len(roots) == 1, [s.name for _, s in spans]
    root = roots[0]
    attrs = _attrs(root.attributes)
    assert attrs["voicepipe.session"] == sid and attrs["voicepipe.pipeline"] == "assistant"
    assert attrs["voicepipe.model.llm"] == cfg.llm.model == "smollm2-135m"
    assert attrs["voicepipe.model.asr"] == cfg.asr.model
    assert attrs["voicepipe.outcome"] == "completed"
    assert not root.parent_span_id
    resource = _attrs(next(r for r, s in spans if s is root).attributes)
    assert resource["service.name"] == "voicepipe"

    # Its children: every span of the trace hangs off the root, none elsewhere.
    children = [s for _, s in spans if s.trace_id == root.trace_id and s is not root]
    assert all(s.parent_span_id == root.span_id for s in children)
    names = {s.name for s in children}
    assert len(children) >= 5 and {"asr.final", "llm.ttft", "tts.ttfa"} <= names, names
    assert set(SPAN_NAMES) - {"e2e.voice_to_voice"} <= names | {"vad.speech"}, names

    # The same spans as the server's JSON trace, to the millisecond.
    mine = [s for s in server.tracer.snapshot() if s.session == sid and s.turn_id == turn_id]
    assert sorted(s.name for s in mine) == sorted(s.name for s in children)
    t0_json = min(s.start_ns for s in mine)
    assert (
        abs(
            (max(s.end_ns for s in mine) - t0_json)
            - (root.end_time_unix_nano - root.start_time_unix_nano)
        )
        / 1e6
        < TOLERANCE_MS
    )
    by_name: dict[str, list] = {}
    for s in sorted(mine, key=lambda s: s.start_ns):
        by_name.setdefault(s.name, []).append(s)
    for s in sorted(children, key=lambda s: s.start_time_unix_nano):
        ref = by_name[s.name].pop(0)
        offset_ms = (s.start_time_unix_nano - root.start_time_unix_nano) / 1e6
        assert abs(offset_ms - (ref.start_ns - t0_json) / 1e6) < TOLERANCE_MS, s.name
        duration_ms = (s.end_time_unix_nano - s.start_time_unix_nano) / 1e6
        assert abs(duration_ms - ref.duration_ms) < TOLERANCE_MS, s.name
        assert _attrs(s.attributes)["voicepipe.session"] == sid

    # The operator's log: the session's start and end, and this turn, searchable.
    lines = [r for r in caplog.records if r.name == "voicepipe.sessions"]
    events = [r.event for r in lines]  # type: ignore[attr-defined]
    assert events[0] == "session_start" and events[-1] == "session_end", events
    (logged,) = [r.fields for r in lines if r.event == "turn" and r.fields["turn"] == turn_id]  # type: ignore[attr-defined]
    assert logged["session"] == sid and logged["outcome"] == "completed"
    assert logged["transcript_chars"] == len(turn["transcript"])
    assert logged["reply_chars"] == len(turn["reply_text"]) > 0
    assert logged["voice_to_voice_ms"] > 0
