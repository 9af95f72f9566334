"""Prometheus text-format metrics for ``GET /metrics``.

Fed from what already flows to each client, so measuring costs nothing extra:
every span (histogram per §9 name, in ms), every stage's MetricsFrame
(speculation counters: drafted/accepted tokens per source; preemptive
replies kept or cancelled), every playback
report's playout counters (underruns, concealed ms), errors by code, and
session counts. One registry per server (not prometheus_client's global one),
so several servers in one process (tests) don't mix their numbers.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from voicepipe.frames import ErrorFrame, MetricsFrame, SpanFrame

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Milliseconds: from sub-frame stage times to multi-second stalls.
_BUCKETS_MS = (5, 10, 25, 50, 100, 150, 200, 300, 400, 600, 900, 1500, 2500, 5000, 10000)
# Playout counters that only ever grow within one reply; reported as running totals.
_PLAYOUT_COUNTERS = ("underruns", "concealed_ms", "accelerated_ms", "stretched_ms")


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.span_ms = Histogram(
            "voicepipe_span_ms",
            "Latency span duration (ms), docs/DESIGN.md §9",
            ["name"],
            buckets=_BUCKETS_MS,
            registry=r,
        )
        self.drafted = Counter(
            "voicepipe_spec_drafted_tokens", "Tokens proposed by drafters", ["source"], registry=r
        )
        self.accepted = Counter(
            "voicepipe_spec_accepted_tokens",
            "Drafted tokens the target accepted",
            ["source"],
            registry=r,
        )
        self.playout = Counter(
            "voicepipe_playout", "Client playout counters (events or ms)", ["counter"], registry=r
        )
        self.reports = Counter(
            "voicepipe_playback_reports", "Playback reports from clients", registry=r
        )
        for name in _PLAYOUT_COUNTERS:  # present (at 0) before the first report
            self.playout.labels(name)
        # Preemptive generation (core/turns/preempt.py): tentative replies kept or cancelled.
        self.preempt = Counter(
            "voicepipe_preempt_replies",
            "Tentative replies started on a stable transcript, by outcome",
            ["outcome"],
            registry=r,
        )
        for outcome in ("kept", "cancelled"):
            self.preempt.labels(outcome)
        self.errors = Counter("voicepipe_errors", "Errors sent to clients", ["code"], registry=r)
        self.sessions = Counter("voicepipe_sessions", "Sessions accepted", registry=r)
        self.closes = Counter(
            "voicepipe_closes", "Connections closed, by close code", ["code"], registry=r
        )
        self.active = Gauge("voicepipe_sessions_active", "Sessions open now", registry=r)
        self.api = Counter(  # server/openai_api.py
            "voicepipe_api_requests", "OpenAI-compatible API requests, by status", ["status"],
            registry=r,
        )  # fmt: skip
        self.trims = Counter(  # server/memory.py; `bench memory` reads RSS once it counts
            "voicepipe_memory_trims", "Free memory handed back after a session", registry=r
        )
        # Last seen playout counters per (session, turn): reports carry running totals.
        self._last_playout: dict[tuple[str, int], dict[str, float]] = {}
        # What each session has added to the playout counters so far, over all its turns.
        self._credited: dict[str, dict[str, float]] = {}

    def observe(self, frame: object) -> None:
        if isinstance(frame, SpanFrame):
            self.span_ms.labels(frame.name).observe(frame.duration_ms)
        elif isinstance(frame, MetricsFrame) and frame.source == "preempt":
            for outcome in ("kept", "cancelled"):
                if frame.values.get(outcome):
                    self.preempt.labels(outcome).inc()
        elif isinstance(frame, MetricsFrame):
            drafted = frame.values.get("drafted")
            accepted = frame.values.get("accepted")
            if isinstance(drafted, (int, float)) and drafted > 0:
                self.drafted.labels(frame.source).inc(drafted)
            if isinstance(accepted, (int, float)) and accepted > 0:
                self.accepted.labels(frame.source).inc(accepted)
        elif isinstance(frame, ErrorFrame):
            self.errors.labels(frame.code).inc()

    def playback(
        self,
        session: str,
        turn: int,
        counters: dict[str, float],
        done: bool,
        age_ms: float,
        frame_ms: float = 20.0,
    ) -> None:
        """One client report. ``age_ms``: how long the session has existed. A session
        cannot have concealed (or stretched, …) more ms of audio than it has existed, nor
        had more underruns than frames in that time, so no client, however it lies, adds
        more than that to the shared counters."""
        self.reports.inc()
        key = (session, turn)
        last = self._last_playout.get(key, {})
        credited = self._credited.setdefault(session, {})
        for name in _PLAYOUT_COUNTERS:
            value = counters.get(name)
            if value is None:
                continue
            cap = age_ms if name.endswith("_ms") else age_ms / frame_ms
            delta = min(float(value) - last.get(name, 0.0), cap - credited.get(name, 0.0))
            if delta > 0:
                credited[name] = credited.get(name, 0.0) + delta
                self.playout.labels(name).inc(delta)
        if done:
            self._last_playout.pop(key, None)
        else:
            self._last_playout[key] = {
                k: float(counters[k]) for k in _PLAYOUT_COUNTERS if k in counters
            }

    def forget_session(self, session: str) -> None:
        self._credited.pop(session, None)
        for key in [k for k in self._last_playout if k[0] == session]:
            del self._last_playout[key]

    def render(self) -> bytes:
        return generate_latest(self.registry)
