"""Realtime API (GA) server events, sans-I/O: typed dataclasses → JSON text.

Names and shapes are the GA ones (``response.output_audio.delta``,
``response.output_audio_transcript.delta``, ``conversation.item.added`` ...); tests
parse every event encoded here with the official ``openai`` SDK's pydantic models
and check that no field is one the SDK does not know.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field, fields
from typing import ClassVar, Protocol, runtime_checkable

from voicepipe.core.realtime.events import (
    AudioFormat,
    FunctionTool,
    Item,
    JsonObject,
    JsonValue,
    MaxTokens,
    RealtimeError,
    ToolChoice,
    Transcription,
    TurnDetection,
)


@runtime_checkable
class _ToJson(Protocol):
    def to_json(self) -> JsonValue: ...


def _json(value: object) -> JsonValue:
    if isinstance(value, _ToJson):
        return value.to_json()
    if isinstance(value, bytes):  # audio deltas travel as base64
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


# ---------------------------------------------------------------- resources


@dataclass(frozen=True, kw_only=True)
class SessionConfig:
    """The effective session, as ``session.created`` / ``session.updated`` report it."""

    id: str
    model: str
    instructions: str = ""
    voice: str = "alloy"
    speed: float = 1.0
    input_format: AudioFormat = field(default_factory=AudioFormat)
    output_format: AudioFormat = field(default_factory=AudioFormat)
    # Resolved server_vad knobs (no None inside), or None: turn detection off.
    turn_detection: TurnDetection | None = None
    transcription: Transcription | None = None
    tools: tuple[FunctionTool, ...] = ()
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    output_modalities: tuple[str, ...] = ("audio",)
    max_output_tokens: MaxTokens = "inf"

    def to_json(self) -> JsonObject:
        td = self.turn_detection
        tr = self.transcription
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": self.model,
            "output_modalities": list(self.output_modalities),
            "instructions": self.instructions,
            "tools": [t.to_json() for t in self.tools],
            "tool_choice": self.tool_choice.to_json(),
            "max_output_tokens": self.max_output_tokens,
            "tracing": None,
            "prompt": None,
            "expires_at": 0,
            "include": None,
            "audio": {
                "input": {
                    "format": self.input_format.to_json(),
                    "transcription": tr.to_json() if tr is not None else None,
                    "noise_reduction": None,
                    "turn_detection": td.to_json() if td is not None else None,
                },
                "output": {
                    "format": self.output_format.to_json(),
                    "voice": self.voice,
                    "speed": self.speed,
                },
            },
        }

    def vad_overrides(self) -> dict[str, float | int]:
        """The ``[vad]`` knobs of voicepipe/config.py this session asks for, by field name
        (``dataclasses.replace(cfg.vad, **overrides)``); empty when turn detection is off."""
        td = self.turn_detection
        if td is None or td.threshold is None or td.silence_duration_ms is None:
            return {}
        return {"threshold": td.threshold, "end_silence_ms": td.silence_duration_ms}

    def eagerness(self) -> str | None:
        """``[turns] eagerness`` for this session's endpointer: semantic_vad's, ``off`` for
        server_vad (silence alone, as the API defines it), None with turn detection off."""
        td = self.turn_detection
        if td is None:
            return None
        return (td.eagerness or "auto") if td.type == "semantic_vad" else "off"


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Token counts the pipeline reported for one response (zeros: it reported none)."""

    input_text_tokens: int = 0
    input_audio_tokens: int = 0
    output_text_tokens: int = 0
    output_audio_tokens: int = 0

    def to_json(self) -> JsonObject:
        inp = self.input_text_tokens + self.input_audio_tokens
        out = self.output_text_tokens + self.output_audio_tokens
        return {
            "total_tokens": inp + out,
            "input_tokens": inp,
            "output_tokens": out,
            "input_token_details": {
                "text_tokens": self.input_text_tokens,
                "audio_tokens": self.input_audio_tokens,
                "cached_tokens": 0,
            },
            "output_token_details": {
                "text_tokens": self.output_text_tokens,
                "audio_tokens": self.output_audio_tokens,
            },
        }


@dataclass(frozen=True, kw_only=True)
class ResponseResource:
    id: str
    status: str  # in_progress | completed | cancelled | incomplete | failed
    conversation_id: str
    output: tuple[Item, ...] = ()
    output_modalities: tuple[str, ...] = ("audio",)
    max_output_tokens: MaxTokens = "inf"
    voice: str = "alloy"
    output_format: AudioFormat = field(default_factory=AudioFormat)
    reason: str | None = None  # turn_detected | client_cancelled | max_output_tokens
    error: RealtimeError | None = None  # status "failed"
    usage: Usage | None = None
    metadata: tuple[tuple[str, str], ...] | None = None

    def to_json(self) -> JsonObject:
        details: JsonValue = None
        if self.status != "in_progress":
            details = {"type": self.status, "reason": self.reason}
            if self.error is not None:
                details["error"] = {
                    "type": self.error.type,
                    "code": self.error.code,
                    "message": self.error.message,
                }
        return {
            "object": "realtime.response",
            "id": self.id,
            "status": self.status,
            "status_details": details,
            "output": [i.to_json() for i in self.output],
            "conversation_id": self.conversation_id,
            "output_modalities": list(self.output_modalities),
            "max_output_tokens": self.max_output_tokens,
            "audio": {"output": {"format": self.output_format.to_json(), "voice": self.voice}},
            "usage": self.usage.to_json() if self.usage is not None else None,
            "metadata": None if self.metadata is None else {k: v for k, v in self.metadata},
        }


@dataclass(frozen=True)
class Part:
    """A content part as ``response.content_part.*`` report it (GA calls them text/audio)."""

    type: str  # "audio" | "text"
    text: str = ""

    def to_json(self) -> JsonObject:
        if self.type == "audio":
            return {"type": "audio", "transcript": self.text}
        return {"type": "text", "text": self.text}


# ---------------------------------------------------------------- events


@dataclass(frozen=True, kw_only=True)
class ServerEvent:
    TYPE: ClassVar[str] = ""
    event_id: str

    def to_json(self) -> JsonObject:
        out: JsonObject = {"type": self.TYPE}
        for f in fields(self):
            out[f.name] = _json(getattr(self, f.name))
        return out


@dataclass(frozen=True, kw_only=True)
class ErrorEvent(ServerEvent):
    TYPE: ClassVar[str] = "error"
    error: RealtimeError


@dataclass(frozen=True, kw_only=True)
class SessionCreated(ServerEvent):
    TYPE: ClassVar[str] = "session.created"
    session: SessionConfig


@dataclass(frozen=True, kw_only=True)
class SessionUpdated(ServerEvent):
    TYPE: ClassVar[str] = "session.updated"
    session: SessionConfig


@dataclass(frozen=True, kw_only=True)
class SpeechStarted(ServerEvent):
    TYPE: ClassVar[str] = "input_audio_buffer.speech_started"
    audio_start_ms: int
    item_id: str


@dataclass(frozen=True, kw_only=True)
class SpeechStopped(ServerEvent):
    TYPE: ClassVar[str] = "input_audio_buffer.speech_stopped"
    audio_end_ms: int
    item_id: str


@dataclass(frozen=True, kw_only=True)
class BufferCommitted(ServerEvent):
    TYPE: ClassVar[str] = "input_audio_buffer.committed"
    item_id: str
    previous_item_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class BufferCleared(ServerEvent):
    TYPE: ClassVar[str] = "input_audio_buffer.cleared"


@dataclass(frozen=True, kw_only=True)
class ItemCreated(ServerEvent):
    """Beta's name for ``conversation.item.added``, still in the GA SDK (sent when asked)."""

    TYPE: ClassVar[str] = "conversation.item.created"
    item: Item
    previous_item_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class ItemAdded(ServerEvent):
    TYPE: ClassVar[str] = "conversation.item.added"
    item: Item
    previous_item_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class ItemDone(ServerEvent):
    TYPE: ClassVar[str] = "conversation.item.done"
    item: Item
    previous_item_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class ItemRetrieved(ServerEvent):
    TYPE: ClassVar[str] = "conversation.item.retrieved"
    item: Item


@dataclass(frozen=True, kw_only=True)
class ItemTruncated(ServerEvent):
    TYPE: ClassVar[str] = "conversation.item.truncated"
    item_id: str
    content_index: int
    audio_end_ms: int


@dataclass(frozen=True, kw_only=True)
class ItemDeleted(ServerEvent):
    TYPE: ClassVar[str] = "conversation.item.deleted"
    item_id: str


@dataclass(frozen=True, kw_only=True)
class TranscriptionDelta(ServerEvent):
    TYPE: ClassVar[str] = "conversation.item.input_audio_transcription.delta"
    item_id: str
    content_index: int = 0
    delta: str


@dataclass(frozen=True)
class DurationUsage:
    seconds: float

    def to_json(self) -> JsonObject:
        return {"type": "duration", "seconds": self.seconds}


@dataclass(frozen=True, kw_only=True)
class TranscriptionCompleted(ServerEvent):
    TYPE: ClassVar[str] = "conversation.item.input_audio_transcription.completed"
    item_id: str
    content_index: int = 0
    transcript: str
    usage: DurationUsage


@dataclass(frozen=True)
class FailureDetail:
    """The error inside a transcription failure (no client event to point at)."""

    code: str
    message: str
    type: str = "server_error"

    def to_json(self) -> JsonObject:
        return {"type": self.type, "code": self.code, "message": self.message, "param": None}


@dataclass(frozen=True, kw_only=True)
class TranscriptionFailed(ServerEvent):
    TYPE: ClassVar[str] = "conversation.item.input_audio_transcription.failed"
    item_id: str
    content_index: int = 0
    error: FailureDetail


@dataclass(frozen=True, kw_only=True)
class ResponseCreated(ServerEvent):
    TYPE: ClassVar[str] = "response.created"
    response: ResponseResource


@dataclass(frozen=True, kw_only=True)
class ResponseDone(ServerEvent):
    TYPE: ClassVar[str] = "response.done"
    response: ResponseResource


@dataclass(frozen=True, kw_only=True)
class OutputItemAdded(ServerEvent):
    TYPE: ClassVar[str] = "response.output_item.added"
    response_id: str
    output_index: int
    item: Item


@dataclass(frozen=True, kw_only=True)
class OutputItemDone(ServerEvent):
    TYPE: ClassVar[str] = "response.output_item.done"
    response_id: str
    output_index: int
    item: Item


@dataclass(frozen=True, kw_only=True)
class _ContentEvent(ServerEvent):
    response_id: str
    item_id: str
    output_index: int
    content_index: int = 0


@dataclass(frozen=True, kw_only=True)
class ContentPartAdded(_ContentEvent):
    TYPE: ClassVar[str] = "response.content_part.added"
    part: Part


@dataclass(frozen=True, kw_only=True)
class ContentPartDone(_ContentEvent):
    TYPE: ClassVar[str] = "response.content_part.done"
    part: Part


@dataclass(frozen=True, kw_only=True)
class OutputAudioDelta(_ContentEvent):
    """``delta`` holds the raw PCM16 24 kHz bytes; it is sent base64-encoded."""

    TYPE: ClassVar[str] = "response.output_audio.delta"
    delta: bytes


@dataclass(frozen=True, kw_only=True)
class OutputAudioDone(_ContentEvent):
    TYPE: ClassVar[str] = "response.output_audio.done"


@dataclass(frozen=True, kw_only=True)
class OutputTranscriptDelta(_ContentEvent):
    TYPE: ClassVar[str] = "response.output_audio_transcript.delta"
    delta: str


@dataclass(frozen=True, kw_only=True)
class OutputTranscriptDone(_ContentEvent):
    TYPE: ClassVar[str] = "response.output_audio_transcript.done"
    transcript: str


@dataclass(frozen=True, kw_only=True)
class OutputTextDelta(_ContentEvent):
    TYPE: ClassVar[str] = "response.output_text.delta"
    delta: str


@dataclass(frozen=True, kw_only=True)
class OutputTextDone(_ContentEvent):
    TYPE: ClassVar[str] = "response.output_text.done"
    text: str


@dataclass(frozen=True, kw_only=True)
class _CallEvent(ServerEvent):
    response_id: str
    item_id: str
    output_index: int
    call_id: str


@dataclass(frozen=True, kw_only=True)
class FunctionArgumentsDelta(_CallEvent):
    TYPE: ClassVar[str] = "response.function_call_arguments.delta"
    delta: str


@dataclass(frozen=True, kw_only=True)
class FunctionArgumentsDone(_CallEvent):
    TYPE: ClassVar[str] = "response.function_call_arguments.done"
    name: str
    arguments: str


SERVER_EVENT_TYPES: dict[str, type[ServerEvent]] = {
    cls.TYPE: cls
    for cls in (
        ErrorEvent,
        SessionCreated,
        SessionUpdated,
        SpeechStarted,
        SpeechStopped,
        BufferCommitted,
        BufferCleared,
        ItemCreated,
        ItemAdded,
        ItemDone,
        ItemRetrieved,
        ItemTruncated,
        ItemDeleted,
        TranscriptionDelta,
        TranscriptionCompleted,
        TranscriptionFailed,
        ResponseCreated,
        ResponseDone,
        OutputItemAdded,
        OutputItemDone,
        ContentPartAdded,
        ContentPartDone,
        OutputAudioDelta,
        OutputAudioDone,
        OutputTranscriptDelta,
        OutputTranscriptDone,
        OutputTextDelta,
        OutputTextDone,
        FunctionArgumentsDelta,
        FunctionArgumentsDone,
    )
}


def encode_server_event(ev: ServerEvent) -> str:
    return json.dumps(ev.to_json(), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def error_event(event_id: str, err: RealtimeError) -> ErrorEvent:
    return ErrorEvent(event_id=event_id, error=err)
