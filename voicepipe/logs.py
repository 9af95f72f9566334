"""Log output for operators: plain text (the default) or one JSON object per line
(``voicepipe serve --log-format json``), which log shippers (Loki, Elasticsearch,
CloudWatch, ``jq``) index without a parsing rule.

A JSON line carries ``ts`` (UTC, ISO 8601), ``level``, ``logger`` and ``msg``, plus the
record's ``event`` and ``fields`` when the code logged them (server/turnlog.py: session
start and end, one line per turn), each field a key of its own::

    {"ts": "...", "level": "INFO", "logger": "voicepipe.sessions", "msg": "turn session=…",
     "event": "turn", "session": "1a2b…", "turn": 1, "transcript_chars": 20, …}
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, timezone.utc)
        out: dict[str, object] = {
            "ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        event = getattr(record, "event", None)
        if event is not None:
            out["event"] = event
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update({k: v for k, v in fields.items() if k not in out})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def use(fmt: str, logger: logging.Logger | None = None) -> None:
    """Every handler of ``logger`` (default: the root) writes ``fmt`` ("text" | "json")."""
    if fmt not in FORMATS:
        raise ValueError(f"log format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    formatter = JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)
    for handler in (logger or logging.getLogger()).handlers:
        handler.setFormatter(formatter)
