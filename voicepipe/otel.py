"""OpenTelemetry export of the spans voicepipe already traces (voicepipe/tracing.py).

One trace per turn: a root span ``turn`` (attributes: session id, turn id, pipeline, the
models, the outcome) spanning its stage spans, each a child of the root under the same
name as in the waterfall, the Chrome trace and the Prometheus histograms (``asr.final``,
``llm.ttft``, …), with the same bounds: the process's monotonic clock moved to the wall
clock by one offset, so durations and gaps are exactly those of the JSON trace.

Export goes through the OpenTelemetry SDK's ``BatchSpanProcessor`` and its OTLP/HTTP
exporter (``[trace] otlp_endpoint``): ``export_turn`` only queues spans; a thread of the
SDK sends them in batches, and a collector that is slow or away drops spans (the SDK's
bounded queue), never a reply.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from voicepipe import __version__
from voicepipe.tracing import SpanRecord

ROOT_SPAN = "turn"
# monotonic ns + this = Unix-epoch ns (what OTLP carries); one reading, so spans keep
# their exact gaps (the wall clock may step later; the spans' shape does not).
_EPOCH_OFFSET_NS = time.time_ns() - time.monotonic_ns()
SCHEDULE_DELAY_MS = 1000  # the batch processor sends at least this often


def traces_url(endpoint: str) -> str:
    """``http://host:4318`` → ``http://host:4318/v1/traces`` (OTLP/HTTP's path for traces);
    a URL with a path is taken as it is."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"trace.otlp_endpoint: expected an http(s) URL, got {endpoint!r}")
    return endpoint if parts.path not in ("", "/") else endpoint.rstrip("/") + "/v1/traces"


def _attr(v: Any) -> Any:
    """OTel attribute values are str, bool, int, float (or lists of one of them)."""
    if isinstance(v, (str, bool, int, float)):
        return v
    return str(v)


class TurnExporter:
    """Turns as OTel traces, through its own ``TracerProvider`` (not the process-global
    one: a library must not take that from its host)."""

    def __init__(
        self,
        endpoint: str = "",
        *,
        exporter: SpanExporter | None = None,
        resource: Mapping[str, Any] | None = None,
    ) -> None:
        res = {"service.name": "voicepipe", "service.version": __version__, **(resource or {})}
        self.provider = TracerProvider(resource=Resource.create(res))
        exporter = exporter or OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=5)
        self.provider.add_span_processor(
            BatchSpanProcessor(exporter, schedule_delay_millis=SCHEDULE_DELAY_MS)
        )
        self.tracer = self.provider.get_tracer("voicepipe", __version__)

    def export_turn(self, spans: Iterable[SpanRecord], attrs: Mapping[str, Any]) -> None:
        """One trace: the root ``turn`` from the first span's start to the last one's end,
        every span a child of it. Queued only (see the module docstring)."""
        spans = sorted(spans, key=lambda s: (s.start_ns, s.name))
        if not spans:
            return
        start = min(s.start_ns for s in spans) + _EPOCH_OFFSET_NS
        end = max(s.end_ns for s in spans) + _EPOCH_OFFSET_NS
        root = self.tracer.start_span(
            ROOT_SPAN,
            context=trace.set_span_in_context(trace.INVALID_SPAN),  # a new trace
            start_time=start,
            attributes={k: _attr(v) for k, v in attrs.items()},
        )
        parent = trace.set_span_in_context(root)
        for s in spans:
            child = self.tracer.start_span(
                s.name,
                context=parent,
                start_time=s.start_ns + _EPOCH_OFFSET_NS,
                attributes={
                    **{k: _attr(v) for k, v in s.attrs.items()},
                    "voicepipe.session": s.session,
                    "voicepipe.turn_id": s.turn_id,
                },
            )
            child.end(end_time=max(s.end_ns, s.start_ns) + _EPOCH_OFFSET_NS)
        root.end(end_time=end)

    def flush(self, timeout_s: float = 5.0) -> bool:
        return self.provider.force_flush(int(timeout_s * 1000))

    def shutdown(self) -> None:
        """Send what is queued (bounded by the exporter's timeout), then stop."""
        self.provider.shutdown()
