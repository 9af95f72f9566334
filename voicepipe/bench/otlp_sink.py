"""A loopback OTLP/HTTP trace receiver: what a collector does with voicepipe's export.

`bench e2e --otlp-sink` starts one so that the cost of tracing on can be measured
(``--variant trace.otlp_endpoint=sink`` against ``--variant trace.otlp_endpoint=``)
with the export really delivered and decoded, as it would be by an OpenTelemetry
Collector, and says how many spans arrived; the end-to-end test of the export
(tests/e2e/test_otel.py) reads the requests it kept.
"""

from __future__ import annotations

import http.server
import threading
from typing import Any

SINK = "sink"  # the value of trace.otlp_endpoint that means "this receiver"


class OtlpSink(http.server.ThreadingHTTPServer):
    """``with OtlpSink() as sink:`` serves on a free loopback port in a thread of its own;
    ``sink.url`` is the endpoint, ``sink.requests`` the decoded export requests."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[Any] = []  # ExportTraceServiceRequest, in arrival order
        self.paths: list[str] = []
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, name="otlp-sink", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def spans(self) -> int:
        with self.lock:
            return sum(
                len(ss.spans)
                for r in self.requests
                for rs in r.resource_spans
                for ss in rs.scope_spans
            )

    def __enter__(self) -> OtlpSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: OtlpSink

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as pb

        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_error(415, "OTLP/HTTP protobuf only")
            return
        req = pb.ExportTraceServiceRequest()
        req.ParseFromString(body)
        with self.server.lock:
            self.server.requests.append(req)
            self.server.paths.append(self.path)
        reply = pb.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


def with_sink(overrides: list[str], url: str) -> list[str]:
    """Config overrides with ``trace.otlp_endpoint=sink`` pointed at the receiver."""
    key = "trace.otlp_endpoint="
    return [f"{key}{url}" if o == f"{key}{SINK}" else o for o in overrides]
