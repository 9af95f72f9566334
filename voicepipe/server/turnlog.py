"""What an operator searches for: one log line per session start and end and per turn,
and (with ``[trace] otlp_endpoint``) one OpenTelemetry trace per turn (voicepipe/otel.py).

A turn is reported once it is over: the client says its reply finished playing, or a
later turn of the same session was heard (a barge-in, or a turn with no reply), or the
session ended. Its line says: session, turn, transcript and reply length (characters),
voice to voice (ms, the server's measure, ``e2e.voice_to_voice``), outcome::

    turn session=1a2b turn=1 transcript_chars=20 reply_chars=84 voice_to_voice_ms=870.2
         outcome=completed      (one line)

Outcomes: ``completed`` (the reply was spoken to its end), ``interrupted`` (cut by the
user), ``no_reply`` (heard, nothing to say: e.g. an empty transcript), ``cut`` (the
session ended mid-turn). Each line's fields also ride on the log record
(``record.fields``), which ``voicepipe serve --log-format json`` prints as JSON keys.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from voicepipe.tracing import E2E_VOICE_TO_VOICE, SpanRecord

if TYPE_CHECKING:
    from voicepipe.otel import TurnExporter

log = logging.getLogger("voicepipe.sessions")


def _line(event: str, fields: dict[str, Any]) -> None:
    text = " ".join(f"{k}={v}" for k, v in fields.items())
    log.info("%s %s", event, text, extra={"event": event, "fields": fields})


@dataclass
class _Turn:
    turn_id: int
    transcript_chars: int | None = None
    reply_chars: int | None = None
    interrupted: bool = False
    voice_to_voice_ms: float | None = None
    spans: list[SpanRecord] = field(default_factory=list)

    def outcome(self, session_over: bool) -> str:
        if self.reply_chars is None:
            return "cut" if session_over and self.transcript_chars else "no_reply"
        return "interrupted" if self.interrupted else "completed"


@dataclass
class _Session:
    id: str
    endpoint: str
    turns: dict[int, _Turn] = field(default_factory=dict)
    reported: int = 0

    def turn(self, turn_id: int) -> _Turn:
        return self.turns.setdefault(turn_id, _Turn(turn_id))


class TurnLog:
    """One per server; fed by its sessions (server/session.py), on the event loop."""

    def __init__(
        self, pipeline: str, models: dict[str, str], exporter: TurnExporter | None = None
    ) -> None:
        self.pipeline = pipeline
        self.models = models
        self.exporter = exporter
        self._sessions: dict[str, _Session] = {}

    # ------------------------------------------------------------------ sessions

    def session_started(self, session_id: str, endpoint: str, address: str) -> None:
        self._sessions[session_id] = _Session(session_id, endpoint)
        _line(
            "session_start",
            {"session": session_id, "endpoint": endpoint, "address": address,
             "pipeline": self.pipeline},
        )  # fmt: skip

    def session_ended(self, session_id: str, code: int | None, reason: str, age_s: float) -> None:
        s = self._sessions.pop(session_id, None)
        if s is None:
            return
        for t in sorted(s.turns):
            self._report(s, s.turns.pop(t), session_over=True)
        fields = {"session": session_id, "turns": s.reported, "duration_s": round(age_s, 1)}
        _line("session_end", {**fields, "close_code": code, "close_reason": repr(reason)})

    # ------------------------------------------------------------------ turns

    def transcript(self, session_id: str, turn_id: int, text: str) -> None:
        s = self._sessions.get(session_id)
        if s is None:
            return
        for t in [t for t in s.turns if t < turn_id]:  # a later turn heard: earlier ones over
            self._report(s, s.turns.pop(t), session_over=False)
        s.turn(turn_id).transcript_chars = len(text)

    def reply(self, session_id: str, turn_id: int, text: str, interrupted: bool) -> None:
        s = self._sessions.get(session_id)
        if s is not None:
            turn = s.turn(turn_id)
            turn.reply_chars, turn.interrupted = len(text), interrupted

    def span(self, session_id: str, span: SpanRecord) -> None:
        s = self._sessions.get(session_id)
        if s is None:
            return
        turn = s.turn(span.turn_id)
        turn.spans.append(span)
        if span.name == E2E_VOICE_TO_VOICE:
            turn.voice_to_voice_ms = round(span.duration_ms, 1)

    def played(self, session_id: str, turn_id: int) -> None:
        """The client reports the reply of ``turn_id`` played to its end."""
        s = self._sessions.get(session_id)
        if s is not None and turn_id in s.turns and s.turns[turn_id].reply_chars is not None:
            self._report(s, s.turns.pop(turn_id), session_over=False)

    def _report(self, s: _Session, turn: _Turn, *, session_over: bool) -> None:
        if turn.transcript_chars is None and turn.reply_chars is None and not turn.spans:
            return
        s.reported += 1
        outcome = turn.outcome(session_over)
        _line(
            "turn",
            {
                "session": s.id,
                "turn": turn.turn_id,
                "transcript_chars": turn.transcript_chars or 0,
                "reply_chars": turn.reply_chars or 0,
                "voice_to_voice_ms": turn.voice_to_voice_ms,
                "outcome": outcome,
            },
        )
        if self.exporter is not None and turn.spans:
            attrs = {
                "voicepipe.session": s.id,
                "voicepipe.turn_id": turn.turn_id,
                "voicepipe.pipeline": self.pipeline,
                "voicepipe.endpoint": s.endpoint,
                "voicepipe.outcome": outcome,
                **{f"voicepipe.model.{k}": v for k, v in self.models.items()},
            }
            self.exporter.export_turn(turn.spans, attrs)
