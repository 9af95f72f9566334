"""OpenAI Realtime API (GA) shapes, sans-I/O: shared objects and the client events.

The field names and nesting follow the GA reference (the ``openai`` SDK's
``openai.types.realtime`` models): ``session.type = "realtime"``, audio formats
under ``session.audio.input.format`` / ``session.audio.output.format`` as
``{"type": "audio/pcm", "rate": 24000}``, turn detection under
``session.audio.input.turn_detection``. docs/REALTIME.md says event by event
what voicepipe honours. Decoding lives in ``realtime_decode``, the server events
in ``realtime_server``, the state machine in ``realtime_session``.

Every object here can say itself as JSON (``to_json``), so a client event
survives ``decode_client_event(encode_client_event(ev)) == ev``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeAlias

JsonValue: TypeAlias = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject = dict[str, JsonValue]

SAMPLE_RATE = 24000  # the only rate the GA API (and so this endpoint) speaks
BYTES_PER_MS = SAMPLE_RATE * 2 // 1000  # PCM16 mono: 48 bytes per millisecond
FORMAT_PCM = "audio/pcm"
FORMATS = (FORMAT_PCM, "audio/pcmu", "audio/pcma")
ROLES = ("user", "assistant", "system")
ITEM_STATUSES = ("completed", "incomplete", "in_progress")
MODALITIES = ("text", "audio")
TOOL_CHOICE_MODES = ("auto", "none", "required")


class RealtimeError(Exception):
    """A client event that cannot be honoured. The session turns it into an ``error`` event
    of the API's shape; the socket stays open (the API never drops a session for bad input).

    ``event_id`` is the offending *client* event's id (so the client can match it)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        param: str | None = None,
        event_id: str | None = None,
        type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param
        self.event_id = event_id
        self.type = type

    def to_json(self) -> JsonObject:
        return {
            "type": self.type,
            "code": self.code,
            "message": self.message,
            "param": self.param,
            "event_id": self.event_id,
        }


# ---------------------------------------------------------------- shared objects


@dataclass(frozen=True)
class AudioFormat:
    """``audio/pcm`` carries a rate (24000 is the only one the API allows); G.711 has none."""

    type: str = FORMAT_PCM
    rate: int | None = SAMPLE_RATE

    def to_json(self) -> JsonObject:
        out: JsonObject = {"type": self.type}
        if self.type == FORMAT_PCM:
            out["rate"] = self.rate if self.rate is not None else SAMPLE_RATE
        return out


@dataclass(frozen=True)
class TurnDetection:
    """``server_vad`` knobs as sent; unset ones are ``None`` (the session fills defaults)."""

    type: str = "server_vad"  # server_vad | semantic_vad
    threshold: float | None = None
    prefix_padding_ms: int | None = None
    silence_duration_ms: int | None = None
    idle_timeout_ms: int | None = None
    create_response: bool | None = None
    interrupt_response: bool | None = None
    eagerness: str | None = None  # semantic_vad only

    def to_json(self) -> JsonObject:
        out: JsonObject = {"type": self.type}
        for key in (
            "threshold",
            "prefix_padding_ms",
            "silence_duration_ms",
            "idle_timeout_ms",
            "create_response",
            "interrupt_response",
            "eagerness",
        ):
            value = getattr(self, key)
            if value is not None or (self.type == "server_vad" and key == "idle_timeout_ms"):
                out[key] = value
        return out


@dataclass(frozen=True)
class Transcription:
    model: str | None = None
    language: str | None = None
    prompt: str | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"model": self.model}
        if self.language is not None:
            out["language"] = self.language
        if self.prompt is not None:
            out["prompt"] = self.prompt
        return out


@dataclass(frozen=True)
class FunctionTool:
    name: str
    description: str = ""
    parameters_json: str = "{}"  # a JSON object, kept as text so the dataclass stays hashable

    @property
    def parameters(self) -> JsonObject:
        value = json.loads(self.parameters_json)
        return value if isinstance(value, dict) else {}

    def to_json(self) -> JsonObject:
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }


@dataclass(frozen=True)
class ToolChoice:
    mode: str = "auto"  # auto | none | required | function
    name: str | None = None  # the forced function when mode == "function"

    def to_json(self) -> JsonValue:
        if self.mode == "function":
            return {"type": "function", "name": self.name}
        return self.mode


# ---------------------------------------------------------------- conversation items


@dataclass(frozen=True)
class ContentPart:
    """One part of a message: ``input_text`` / ``output_text`` carry ``text``,
    ``input_audio`` / ``output_audio`` carry ``transcript`` (audio bytes are never echoed)."""

    type: str
    text: str | None = None
    transcript: str | None = None

    def to_json(self) -> JsonObject:
        if self.type in ("input_text", "output_text"):
            return {"type": self.type, "text": self.text or ""}
        return {"type": self.type, "transcript": self.transcript}


@dataclass(frozen=True)
class MessageItem:
    role: str
    content: tuple[ContentPart, ...]
    id: str | None = None
    status: str | None = None
    TYPE: ClassVar[str] = "message"

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "type": "message",
            "role": self.role,
            "content": [c.to_json() for c in self.content],
        }
        return _item_envelope(out, self.id, self.status)

    @property
    def text(self) -> str:
        """Everything said in the item, text and transcripts alike (what the LLM reads)."""
        return " ".join(
            (c.text if c.text is not None else c.transcript or "").strip() for c in self.content
        ).strip()


@dataclass(frozen=True)
class FunctionCallItem:
    name: str
    arguments: str
    call_id: str | None = None
    id: str | None = None
    status: str | None = None
    TYPE: ClassVar[str] = "function_call"

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "type": "function_call",
            "name": self.name,
            "call_id": self.call_id,
            "arguments": self.arguments,
        }
        return _item_envelope(out, self.id, self.status)


@dataclass(frozen=True)
class FunctionCallOutputItem:
    call_id: str
    output: str
    id: str | None = None
    status: str | None = None
    TYPE: ClassVar[str] = "function_call_output"

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "type": "function_call_output",
            "call_id": self.call_id,
            "output": self.output,
        }
        return _item_envelope(out, self.id, self.status)


Item: TypeAlias = MessageItem | FunctionCallItem | FunctionCallOutputItem


def _item_envelope(body: JsonObject, item_id: str | None, status: str | None) -> JsonObject:
    out: JsonObject = {"object": "realtime.item"}
    if item_id is not None:
        out["id"] = item_id
    out.update(body)
    if status is not None:
        out["status"] = status
    return out


# ---------------------------------------------------------------- client events

MaxTokens: TypeAlias = int | Literal["inf"]


@dataclass(frozen=True, kw_only=True)
class SessionPatch:
    """The fields a ``session.update`` sets; ``None`` = left as it is. ``turn_detection`` and
    ``transcription`` may also be set to null (off): ``*_set`` says whether the key came."""

    type: str = "realtime"
    model: str | None = None
    instructions: str | None = None
    voice: str | None = None
    speed: float | None = None
    input_format: AudioFormat | None = None
    output_format: AudioFormat | None = None
    turn_detection: TurnDetection | None = None
    turn_detection_set: bool = False
    transcription: Transcription | None = None
    transcription_set: bool = False
    tools: tuple[FunctionTool, ...] | None = None
    tool_choice: ToolChoice | None = None
    output_modalities: tuple[str, ...] | None = None
    max_output_tokens: MaxTokens | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"type": self.type}
        for key in ("model", "instructions"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        inp: JsonObject = {}
        if self.input_format is not None:
            inp["format"] = self.input_format.to_json()
        if self.turn_detection_set:
            td = self.turn_detection
            inp["turn_detection"] = td.to_json() if td is not None else None
        if self.transcription_set:
            tr = self.transcription
            inp["transcription"] = tr.to_json() if tr is not None else None
        outp: JsonObject = {}
        if self.output_format is not None:
            outp["format"] = self.output_format.to_json()
        if self.voice is not None:
            outp["voice"] = self.voice
        if self.speed is not None:
            outp["speed"] = self.speed
        audio: JsonObject = {}
        if inp:
            audio["input"] = inp
        if outp:
            audio["output"] = outp
        if audio:
            out["audio"] = audio
        if self.tools is not None:
            out["tools"] = [t.to_json() for t in self.tools]
        if self.tool_choice is not None:
            out["tool_choice"] = self.tool_choice.to_json()
        if self.output_modalities is not None:
            out["output_modalities"] = list(self.output_modalities)
        if self.max_output_tokens is not None:
            out["max_output_tokens"] = self.max_output_tokens
        return out


@dataclass(frozen=True, kw_only=True)
class ResponseParams:
    """``response.create``'s ``response``: per-response overrides of the session."""

    instructions: str | None = None
    output_modalities: tuple[str, ...] | None = None
    max_output_tokens: MaxTokens | None = None
    metadata: tuple[tuple[str, str], ...] | None = None
    conversation: str | None = None  # "auto" only (out-of-band responses are rejected)
    tools: tuple[FunctionTool, ...] | None = None
    tool_choice: ToolChoice | None = None
    voice: str | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {}
        for key in ("instructions", "max_output_tokens", "conversation"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.output_modalities is not None:
            out["output_modalities"] = list(self.output_modalities)
        if self.metadata is not None:
            out["metadata"] = {k: v for k, v in self.metadata}
        if self.tools is not None:
            out["tools"] = [t.to_json() for t in self.tools]
        if self.tool_choice is not None:
            out["tool_choice"] = self.tool_choice.to_json()
        if self.voice is not None:
            out["audio"] = {"output": {"voice": self.voice}}
        return out


@dataclass(frozen=True, kw_only=True)
class ClientEvent:
    TYPE: ClassVar[str] = ""
    event_id: str | None = None

    def body(self) -> JsonObject:
        return {}

    def to_json(self) -> JsonObject:
        out: JsonObject = {"type": self.TYPE}
        if self.event_id is not None:
            out["event_id"] = self.event_id
        out.update(self.body())
        return out


@dataclass(frozen=True, kw_only=True)
class SessionUpdate(ClientEvent):
    TYPE: ClassVar[str] = "session.update"
    session: SessionPatch

    def body(self) -> JsonObject:
        return {"session": self.session.to_json()}


@dataclass(frozen=True, kw_only=True)
class InputAudioAppend(ClientEvent):
    """``audio`` is the decoded PCM16 little-endian mono 24 kHz bytes."""

    TYPE: ClassVar[str] = "input_audio_buffer.append"
    audio: bytes

    def body(self) -> JsonObject:
        return {"audio": base64.b64encode(self.audio).decode("ascii")}


@dataclass(frozen=True, kw_only=True)
class InputAudioCommit(ClientEvent):
    TYPE: ClassVar[str] = "input_audio_buffer.commit"


@dataclass(frozen=True, kw_only=True)
class InputAudioClear(ClientEvent):
    TYPE: ClassVar[str] = "input_audio_buffer.clear"


@dataclass(frozen=True, kw_only=True)
class ItemCreate(ClientEvent):
    TYPE: ClassVar[str] = "conversation.item.create"
    item: Item
    previous_item_id: str | None = None

    def body(self) -> JsonObject:
        out: JsonObject = {"item": self.item.to_json()}
        if self.previous_item_id is not None:
            out["previous_item_id"] = self.previous_item_id
        return out


@dataclass(frozen=True, kw_only=True)
class ItemTruncate(ClientEvent):
    TYPE: ClassVar[str] = "conversation.item.truncate"
    item_id: str
    content_index: int
    audio_end_ms: int

    def body(self) -> JsonObject:
        return {
            "item_id": self.item_id,
            "content_index": self.content_index,
            "audio_end_ms": self.audio_end_ms,
        }


@dataclass(frozen=True, kw_only=True)
class ItemDelete(ClientEvent):
    TYPE: ClassVar[str] = "conversation.item.delete"
    item_id: str

    def body(self) -> JsonObject:
        return {"item_id": self.item_id}


@dataclass(frozen=True, kw_only=True)
class ItemRetrieve(ClientEvent):
    TYPE: ClassVar[str] = "conversation.item.retrieve"
    item_id: str

    def body(self) -> JsonObject:
        return {"item_id": self.item_id}


@dataclass(frozen=True, kw_only=True)
class ResponseCreate(ClientEvent):
    TYPE: ClassVar[str] = "response.create"
    response: ResponseParams | None = None

    def body(self) -> JsonObject:
        return {} if self.response is None else {"response": self.response.to_json()}


@dataclass(frozen=True, kw_only=True)
class ResponseCancel(ClientEvent):
    TYPE: ClassVar[str] = "response.cancel"
    response_id: str | None = None

    def body(self) -> JsonObject:
        return {} if self.response_id is None else {"response_id": self.response_id}


@dataclass(frozen=True, kw_only=True)
class OutputAudioClear(ClientEvent):
    """WebRTC/SIP only in the API; decoded so the session can answer it with a clear error."""

    TYPE: ClassVar[str] = "output_audio_buffer.clear"


CLIENT_EVENT_TYPES: dict[str, type[ClientEvent]] = {
    cls.TYPE: cls
    for cls in (
        SessionUpdate,
        InputAudioAppend,
        InputAudioCommit,
        InputAudioClear,
        ItemCreate,
        ItemTruncate,
        ItemDelete,
        ItemRetrieve,
        ResponseCreate,
        ResponseCancel,
        OutputAudioClear,
    )
}


def encode_client_event(ev: ClientEvent) -> str:
    """What a client sends (tests and voicepipe's own clients use it)."""
    return json.dumps(ev.to_json(), separators=(",", ":"), ensure_ascii=False)
