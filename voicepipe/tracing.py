"""Latency spans per turn: collection, JSONL and Chrome-trace export, percentiles.

Stages emit ``SpanFrame``s (voicepipe.frames) named as in docs/DESIGN.md §9; the
server's session sink hands each one to a ``Tracer`` (and to the client as a
``span`` message). The client records what the server reported plus what only
it can measure (``e2e.voice_to_voice``) into its own Tracer.

File formats:
- JSONL: one span per line ``{"name", "session", "turn_id", "start_ms",
  "duration_ms", "attrs"}``; ``start_ms`` is on the process's monotonic clock.
- Chrome trace event JSON (opens in Perfetto / chrome://tracing): complete
  events (``"ph": "X"``), one process per session, one thread per stage prefix
  (``asr``, ``llm``, …).
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicepipe.frames import SpanFrame

# docs/DESIGN.md §9: these names are part of the interface.
VAD_SPEECH = "vad.speech"
ASR_FINAL = "asr.final"
LLM_TTFT = "llm.ttft"
LLM_TPOT = "llm.tpot"
LLM_FIRST_CHUNK = "llm.first_chunk"
TTS_TTFA = "tts.ttfa"
E2E_VOICE_TO_VOICE = "e2e.voice_to_voice"
SPAN_NAMES = (
    VAD_SPEECH,
    ASR_FINAL,
    LLM_TTFT,
    LLM_TPOT,
    LLM_FIRST_CHUNK,
    TTS_TTFA,
    E2E_VOICE_TO_VOICE,
)


@dataclass(frozen=True)
class SpanRecord:
    name: str
    start_ns: int
    end_ns: int
    turn_id: int = 0
    session: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "session": self.session,
            "turn_id": self.turn_id,
            "start_ms": self.start_ns / 1e6,
            "duration_ms": self.duration_ms,
            "attrs": self.attrs,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SpanRecord:
        start_ns = round(float(obj["start_ms"]) * 1e6)
        return cls(
            name=str(obj["name"]),
            start_ns=start_ns,
            end_ns=start_ns + round(float(obj["duration_ms"]) * 1e6),
            turn_id=int(obj.get("turn_id", 0)),
            session=str(obj.get("session", "")),
            attrs=dict(obj.get("attrs") or {}),
        )

    @classmethod
    def from_frame(cls, frame: SpanFrame, session: str = "") -> SpanRecord:
        return cls(
            frame.name, frame.start_ns, frame.end_ns, frame.turn_id, session, dict(frame.attrs)
        )


class Tracer:
    """Thread-safe span collector. ``path`` (optional) is written by ``save``/``close``;
    a ``.json`` suffix means Chrome trace format, anything else JSONL. A long-running
    server keeps only the newest ``max_spans`` (memory must not grow without bound)."""

    def __init__(self, path: str | Path | None = None, max_spans: int = 200_000) -> None:
        self.path = Path(path) if path else None
        self.spans: deque[SpanRecord] = deque(maxlen=max_spans)
        self._lock = threading.Lock()

    def add(self, span: SpanRecord | SpanFrame, session: str = "") -> SpanRecord:
        rec = span if isinstance(span, SpanRecord) else SpanRecord.from_frame(span, session)
        with self._lock:
            self.spans.append(rec)
        return rec

    def record(
        self,
        name: str,
        start_ns: int,
        end_ns: int,
        *,
        turn_id: int = 0,
        session: str = "",
        **attrs: Any,
    ) -> SpanRecord:
        return self.add(SpanRecord(name, start_ns, end_ns, turn_id, session, attrs))

    def snapshot(self) -> list[SpanRecord]:
        with self._lock:
            return list(self.spans)

    def save(self, path: str | Path | None = None) -> Path | None:
        target = Path(path) if path else self.path
        if target is None:
            return None
        spans = self.snapshot()
        if target.suffix == ".json":
            write_chrome(target, spans)
        else:
            write_jsonl(target, spans)
        return target

    def summary(self) -> dict[str, dict[str, float]]:
        return summarize(self.snapshot())


def write_jsonl(path: str | Path, spans: Iterable[SpanRecord]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w") as f:
        for s in spans:
            f.write(json.dumps(s.to_json(), default=str) + "\n")


def chrome_events(spans: Iterable[SpanRecord]) -> list[dict[str, Any]]:
    spans = list(spans)
    t0 = min((s.start_ns for s in spans), default=0)
    pids: dict[str, int] = {}
    tids: dict[str, int] = {}
    events: list[dict[str, Any]] = []
    for s in spans:
        session = s.session
        stage = s.name.split(".", 1)[0]
        if session not in pids:
            pids[session] = len(pids) + 1
            events.append(
                {
                    "ph": "M",
                    "name": "process_name",
                    "pid": pids[session],
                    "tid": 0,
                    "args": {"name": session or "voicepipe"},
                }
            )
        if stage not in tids:
            tids[stage] = len(tids) + 1
        events.append(
            {
                "name": s.name,
                "cat": stage,
                "ph": "X",
                "ts": (s.start_ns - t0) / 1e3,  # µs
                "dur": max(0.0, (s.end_ns - s.start_ns) / 1e3),
                "pid": pids[session],
                "tid": tids[stage],
                "args": {**s.attrs, "turn_id": s.turn_id, "session": s.session},
            }
        )
    for pid in pids.values():
        for stage, tid in tids.items():
            events.append(
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": stage}}
            )
    return events


def write_chrome(path: str | Path, spans: Iterable[SpanRecord]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(
        json.dumps({"traceEvents": chrome_events(spans), "displayTimeUnit": "ms"}, default=str)
    )


def load(path: str | Path) -> list[SpanRecord]:
    """Read spans back from JSONL or Chrome trace JSON (as written above)."""
    text = Path(path).read_text()
    stripped = text.lstrip()
    if stripped.startswith("{") and '"traceEvents"' in stripped[:200]:
        events = json.loads(text)["traceEvents"]
        out = []
        for e in events:
            if e.get("ph") != "X":
                continue
            args = dict(e.get("args") or {})
            turn = int(args.pop("turn_id", 0))
            session = str(args.pop("session", ""))
            start = round(float(e["ts"]) * 1e3)
            out.append(
                SpanRecord(
                    e["name"], start, start + round(float(e["dur"]) * 1e3), turn, session, args
                )
            )
        return out
    spans = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            spans.append(SpanRecord.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{i}: not a span record ({e})") from None
    return spans


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100] (numpy's default method)."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(spans: Iterable[SpanRecord]) -> dict[str, dict[str, float]]:
    """Per span name: count, mean, p50, p95, p99, max of the durations in ms.
    §9 names come first in their documented order, others alphabetically."""
    by_name: dict[str, list[float]] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s.duration_ms)
    order = [n for n in SPAN_NAMES if n in by_name] + sorted(set(by_name) - set(SPAN_NAMES))
    return {
        n: {
            "count": len(by_name[n]),
            "mean": sum(by_name[n]) / len(by_name[n]),
            "p50": percentile(by_name[n], 50),
            "p95": percentile(by_name[n], 95),
            "p99": percentile(by_name[n], 99),
            "max": max(by_name[n]),
        }
        for n in order
    }


def format_summary(summary: dict[str, dict[str, float]]) -> str:
    lines = [f"{'span':<24}{'n':>6}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'max ms':>10}"]
    for name, s in summary.items():
        lines.append(
            f"{name:<24}{int(s['count']):>6}{s['p50']:>10.1f}{s['p95']:>10.1f}"
            f"{s['p99']:>10.1f}{s['max']:>10.1f}"
        )
    return "\n".join(lines)
