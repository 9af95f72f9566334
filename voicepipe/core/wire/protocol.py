"""Wire protocol v1, sans-I/O: bytes/str in, typed objects out (and back).

The normative description is docs/PROTOCOL.md; this module is its executable
form. Nothing here touches a socket or a clock. Every malformed input raises
``ProtocolError`` (carrying the WebSocket close code and reason the server
uses), never any other exception.

Binary messages are audio frames: a fixed 20-byte little-endian header
followed by PCM16 mono little-endian samples. Text messages are JSON objects
with a ``type`` field; each type is one dataclass below.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

VERSION = 1
FORMAT_PCM16 = "pcm16"
MIN_SAMPLE_RATE = 8000
MAX_SAMPLE_RATE = 48000

# ---------------------------------------------------------------- close codes

CLOSE_NORMAL = 1000  # the session ended as asked (client sent "end", all replies done)
CLOSE_GOING_AWAY = 1001  # the server is shutting down
CLOSE_PROTOCOL_ERROR = 1002  # malformed frame/message, or a message out of order
CLOSE_INVALID_DATA = 1007  # a text frame that is not UTF-8 (sent by the WebSocket library)
CLOSE_POLICY = 1008  # evicted from the pending pool, or the client stopped reading
CLOSE_MESSAGE_TOO_BIG = 1009  # a message above the server's max_message_bytes
CLOSE_INTERNAL_ERROR = 1011  # a pipeline stage failed; an "error" message precedes it
CLOSE_REPLICA_LOST = 1012  # Ray Serve: the replica holding the session died (reconnect)
CLOSE_TOO_MANY_SESSIONS = 1013  # "try again later": max_sessions reached
CLOSE_BAD_AUTH = 4001  # the hello lacked the configured token, or it was wrong
CLOSE_BAD_ORIGIN = 4003  # Origin not allowed (normally refused with HTTP 403 already)
CLOSE_IDLE_TIMEOUT = 4008  # nothing received for idle_timeout_s (or no hello in time)
CLOSE_BAD_FORMAT = 4015  # unsupported audio format or sample rate

CLOSE_REASONS: dict[int, str] = {
    CLOSE_NORMAL: "session ended",
    CLOSE_GOING_AWAY: "server shutting down",
    CLOSE_PROTOCOL_ERROR: "protocol error",
    CLOSE_INVALID_DATA: "invalid frame payload data",
    CLOSE_POLICY: "policy violation",
    CLOSE_MESSAGE_TOO_BIG: "message too big",
    CLOSE_INTERNAL_ERROR: "pipeline error",
    CLOSE_REPLICA_LOST: "replica lost",
    CLOSE_TOO_MANY_SESSIONS: "too many sessions",
    CLOSE_BAD_AUTH: "bad auth token",
    CLOSE_BAD_ORIGIN: "origin not allowed",
    CLOSE_IDLE_TIMEOUT: "idle timeout",
    CLOSE_BAD_FORMAT: "unsupported audio format or sample rate",
}

MAX_REASON_BYTES = 123  # RFC 6455: close payload ≤ 125 bytes, 2 of which are the code


class ProtocolError(Exception):
    """A peer broke the protocol. ``code`` is the close code to send, ``reason`` its text."""

    def __init__(self, reason: str, code: int = CLOSE_PROTOCOL_ERROR) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason

    @property
    def close_reason(self) -> str:
        """The reason clipped to what fits in a WebSocket close frame."""
        raw = self.reason.encode("utf-8")[:MAX_REASON_BYTES]
        return raw.decode("utf-8", errors="ignore")


# ---------------------------------------------------------------- audio frames

KIND_AUDIO_IN = 1  # client → server: microphone audio at the hello's sample_rate
KIND_AUDIO_OUT = 2  # server → client: reply audio at the session's output_sample_rate
KINDS = (KIND_AUDIO_IN, KIND_AUDIO_OUT)

FLAG_LAST = 0x0001  # last frame of a reply (server → client)
KNOWN_FLAGS = FLAG_LAST

# version u8, kind u8, flags u16, seq u32, turn_id u32, media_ts u64 (samples)
HEADER = struct.Struct("<BBHIIQ")
HEADER_BYTES = HEADER.size  # 20
U32 = 1 << 32
U64 = 1 << 64
# media_ts bound: a timeline of 2**45 samples is 23 years at 48 kHz, and converted to
# nanoseconds at 8 kHz it still fits an int64 (what numpy and the stages use).
MAX_MEDIA_TS = 1 << 45


@dataclass(frozen=True)
class AudioFrame:
    """One binary message. ``media_ts`` is the index of the first sample on the stream's
    timeline (at that stream's sample rate); ``pcm`` holds int16 samples."""

    kind: int
    seq: int
    media_ts: int
    pcm: np.ndarray  # (N,) int16
    turn_id: int = 0
    flags: int = 0

    @property
    def last(self) -> bool:
        return bool(self.flags & FLAG_LAST)

    def float32(self) -> np.ndarray:
        return self.pcm.astype(np.float32) / 32768.0


def encode_audio(frame: AudioFrame) -> bytes:
    if frame.kind not in KINDS:
        raise ProtocolError(f"unknown audio kind {frame.kind}")
    if frame.flags & ~KNOWN_FLAGS or not 0 <= frame.flags < 1 << 16:
        raise ProtocolError(f"unknown audio flags {frame.flags:#x}")
    if not (
        0 <= frame.seq < U32 and 0 <= frame.turn_id < U32 and 0 <= frame.media_ts <= MAX_MEDIA_TS
    ):
        raise ProtocolError("audio header field out of range")
    pcm = np.asarray(frame.pcm)
    if pcm.ndim != 1 or pcm.dtype != np.int16:
        raise ProtocolError("audio payload must be 1-D int16")
    header = HEADER.pack(VERSION, frame.kind, frame.flags, frame.seq, frame.turn_id, frame.media_ts)
    return header + pcm.astype("<i2").tobytes()


def decode_audio(data: bytes | bytearray | memoryview) -> AudioFrame:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProtocolError("audio frame must be binary")
    data = bytes(data)
    if len(data) < HEADER_BYTES:
        raise ProtocolError(f"audio frame shorter than its {HEADER_BYTES}-byte header")
    version, kind, flags, seq, turn_id, media_ts = HEADER.unpack_from(data)
    if version != VERSION:
        raise ProtocolError(f"unsupported audio frame version {version}")
    if kind not in KINDS:
        raise ProtocolError(f"unknown audio kind {kind}")
    if flags & ~KNOWN_FLAGS:
        raise ProtocolError(f"unknown audio flags {flags:#x}")
    if media_ts > MAX_MEDIA_TS:
        raise ProtocolError(f"audio media_ts above 2**45 ({media_ts})")
    payload = data[HEADER_BYTES:]
    if len(payload) % 2:
        raise ProtocolError("PCM16 payload has an odd number of bytes")
    pcm = np.frombuffer(payload, dtype="<i2").astype(np.int16)
    return AudioFrame(kind=kind, seq=seq, media_ts=media_ts, pcm=pcm, turn_id=turn_id, flags=flags)


def pcm16_from_float(pcm: np.ndarray) -> np.ndarray:
    """Exact inverse of ``AudioFrame.float32`` (scale 32768), so PCM16 survives a round trip."""
    scaled = np.round(np.asarray(pcm, dtype=np.float32) * 32768.0)
    return np.clip(scaled, -32768, 32767).astype(np.int16)


# ---------------------------------------------------------------- text messages

Json = Any  # a JSON value (str, int, float, bool, None, list, dict)
_MAX_INT = 1 << 53  # exactly representable in JavaScript
MAX_TURN = U32 - 2  # turn ids ride in the u32 audio header, and turn_id + 1 must fit too
MAX_CLIENT_MS = 1e13  # a client clock reading in ms (~300 years): anything above is garbage
MAX_COUNTER = 1e12  # a playout counter (events or ms) of one reply
MAX_PLAYBACK_AGE_MS = 7 * 86_400_000.0  # now_ms - first_play_ms of a report: a week at most
MAX_PLAYBACK_LEAD_MS = 60_000.0  # first_play_ms after now_ms: a scheduled start, not minutes
MAX_COUNTERS = 32  # keys in one playback report's counters
MAX_TEXT = 256  # free-text fields a client sends (reason, client name)


def _limit(
    *, lo: float | None = None, hi: float | None = None, max_len: int | None = None, **kw: Any
) -> Any:
    """A dataclass field whose decoded value must lie in [lo, hi] (numbers, and every
    value of a number map) or have at most ``max_len`` characters / keys. Checked at the
    protocol boundary, so no number a client makes up reaches a session or the metrics."""
    return field(metadata={"lo": lo, "hi": hi, "max_len": max_len}, **kw)


@dataclass(frozen=True, kw_only=True)
class Message:
    TYPE: ClassVar[str] = ""


# client → server -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Hello(Message):
    """First message of every session. ``output_sample_rate`` 0 = server's choice."""

    TYPE: ClassVar[str] = "hello"
    version: int = VERSION
    sample_rate: int
    format: str = _limit(max_len=MAX_TEXT, default=FORMAT_PCM16)
    output_sample_rate: int = 0
    token: str = _limit(max_len=1024, default="")
    client: str = _limit(max_len=MAX_TEXT, default="")


@dataclass(frozen=True, kw_only=True)
class InterruptMsg(Message):
    """Client → server: stop the current reply (e.g. a stop button); server → client:
    drop queued audio of turns < turn_id (barge-in)."""

    TYPE: ClassVar[str] = "interrupt"
    turn_id: int = _limit(lo=0, hi=MAX_TURN, default=0)
    reason: str = _limit(max_len=MAX_TEXT, default="")


@dataclass(frozen=True, kw_only=True)
class Playback(Message):
    """Which sample of which reply the client played when (client clock, ms).

    ``played_samples`` counts samples of reply ``turn_id`` played so far at
    ``sample_rate``; ``first_play_ms`` is when the first of them was played and
    ``now_ms`` when this report was written, both on the client's own monotonic
    clock (the server only uses their difference). ``counters`` are the
    playout buffer's counters (underruns, concealed_ms, …)."""

    TYPE: ClassVar[str] = "playback"
    turn_id: int = _limit(lo=0, hi=MAX_TURN)
    played_samples: int = _limit(lo=0, hi=_MAX_INT)
    # Playback devices may run above the wire's 48 kHz (96/192 kHz sound cards).
    sample_rate: int = _limit(lo=MIN_SAMPLE_RATE, hi=384000)
    first_play_ms: float | None = _limit(lo=-MAX_CLIENT_MS, hi=MAX_CLIENT_MS, default=None)
    now_ms: float = _limit(lo=-MAX_CLIENT_MS, hi=MAX_CLIENT_MS, default=0.0)
    done: bool = False
    counters: dict[str, float] = _limit(
        lo=0.0, hi=MAX_COUNTER, max_len=MAX_COUNTERS, default_factory=dict
    )

    def __post_init__(self) -> None:
        # first_play may lie up to one pull block after now (it is scheduled, then
        # reported), never minutes; a report from further off is not a clock reading.
        if self.first_play_ms is not None and not (
            -MAX_PLAYBACK_LEAD_MS <= self.now_ms - self.first_play_ms <= MAX_PLAYBACK_AGE_MS
        ):
            raise ProtocolError("playback: first_play_ms and now_ms are too far apart")


@dataclass(frozen=True, kw_only=True)
class EndInput(Message):
    """No more audio will come; the server finishes the replies, says "done", closes 1000."""

    TYPE: ClassVar[str] = "end"


# server → client -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class HelloAck(Message):
    TYPE: ClassVar[str] = "hello_ack"
    version: int = VERSION
    session_id: str
    pipeline: str
    input_sample_rate: int
    output_sample_rate: int
    frame_ms: int
    max_message_bytes: int
    idle_timeout_s: float


@dataclass(frozen=True, kw_only=True)
class Transcript(Message):
    """ASR text for ``turn_id``. ``speech_end_ms``: media time (ms on the client's input
    timeline) of the last speech sample, set on finals."""

    TYPE: ClassVar[str] = "transcript"
    turn_id: int
    text: str
    final: bool = False
    speech_end_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class ReplyStart(Message):
    """The first audio frame of reply ``turn_id`` follows; it starts at ``media_ts``."""

    TYPE: ClassVar[str] = "reply_start"
    turn_id: int
    media_ts: int
    sample_rate: int


@dataclass(frozen=True, kw_only=True)
class ReplyText(Message):
    TYPE: ClassVar[str] = "reply_text"
    turn_id: int
    delta: str


@dataclass(frozen=True, kw_only=True)
class ReplyEndMsg(Message):
    """Reply ``turn_id`` is complete (or was cut: ``interrupted``); ``samples`` were sent."""

    TYPE: ClassVar[str] = "reply_end"
    turn_id: int
    text: str = ""
    samples: int = 0
    interrupted: bool = False


@dataclass(frozen=True, kw_only=True)
class Span(Message):
    """A finished latency span (names: docs/DESIGN.md §9). Times are ms on the server clock
    since the session started."""

    TYPE: ClassVar[str] = "span"
    turn_id: int
    name: str
    start_ms: float
    duration_ms: float
    attrs: dict[str, Json] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Metrics(Message):
    TYPE: ClassVar[str] = "metrics"
    turn_id: int = 0
    source: str
    values: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Error(Message):
    """``code`` is a short machine-readable string; ``fatal`` errors are followed by a close."""

    TYPE: ClassVar[str] = "error"
    code: str
    message: str
    fatal: bool = False
    retry_after_s: float | None = None  # too_many_sessions: when trying again may succeed


@dataclass(frozen=True, kw_only=True)
class AlertMsg(Message):
    """Something the assistant announces unasked (``kind`` "timer": a timer set by a tool
    ended). ``text`` is what it says; the same words follow as reply ``turn_id``'s audio.
    ``data``: for a timer, ``id``, ``seconds`` and ``label``."""

    TYPE: ClassVar[str] = "alert"
    turn_id: int
    kind: str
    text: str
    data: dict[str, Json] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Done(Message):
    """Answer to "end": every reply has been sent; a 1000 close follows."""

    TYPE: ClassVar[str] = "done"


MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.TYPE: cls
    for cls in (
        Hello,
        InterruptMsg,
        Playback,
        EndInput,
        HelloAck,
        Transcript,
        ReplyStart,
        ReplyText,
        ReplyEndMsg,
        Span,
        Metrics,
        Error,
        AlertMsg,
        Done,
    )
}
CLIENT_TYPES = frozenset({"hello", "interrupt", "playback", "end"})
SERVER_TYPES = frozenset(MESSAGE_TYPES) - {"hello", "playback", "end"}


def _check_field(f: dataclasses.Field[Any], value: Any, typ: Any) -> Any:
    """Validate one decoded JSON value against its field's annotation and limits."""
    value = _check(f.name, value, typ)
    lo, hi, max_len = (f.metadata.get(k) for k in ("lo", "hi", "max_len"))
    if max_len is not None and value is not None and len(value) > max_len:
        raise ProtocolError(f"field {f.name!r} longer than {max_len}")
    if lo is not None or hi is not None:
        numbers = value.values() if isinstance(value, dict) else [value]
        for v in numbers:
            if v is not None and not ((lo is None or v >= lo) and (hi is None or v <= hi)):
                raise ProtocolError(f"field {f.name!r} out of range [{lo}, {hi}]")
    return value


def _check(name: str, value: Any, typ: Any) -> Any:
    """Validate one decoded JSON value against a field's annotation."""
    origin = typing.get_origin(typ)
    args = typing.get_args(typ)
    if args and type(None) in args:  # X | None
        if value is None:
            return None
        (typ,) = [a for a in args if a is not type(None)]
        return _check(name, value, typ)
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ProtocolError(f"field {name!r} must be an object")
        if args[1] is float:
            return {k: _check(f"{name}.{k}", v, float) for k, v in value.items()}
        return dict(value)
    if typ is bool:
        if not isinstance(value, bool):
            raise ProtocolError(f"field {name!r} must be true/false")
        return value
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProtocolError(f"field {name!r} must be an integer")
        if not -_MAX_INT <= value <= _MAX_INT:
            raise ProtocolError(f"field {name!r} out of range")
        return value
    if typ is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProtocolError(f"field {name!r} must be a number")
        if not math.isfinite(value):
            raise ProtocolError(f"field {name!r} must be finite")
        return float(value)
    if typ is str:
        if not isinstance(value, str):
            raise ProtocolError(f"field {name!r} must be a string")
        return value
    raise ProtocolError(f"field {name!r}: unsupported type")  # pragma: no cover


_HINTS: dict[type, dict[str, Any]] = {
    cls: typing.get_type_hints(cls) for cls in MESSAGE_TYPES.values()
}


def _reject_constant(token: str) -> Any:
    raise ProtocolError(f"JSON constant {token} is not allowed")


def decode_message(data: str | bytes) -> Message:
    """Parse one text message. Unknown fields are ignored (forward compatibility)."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        if not isinstance(text, str):
            raise ProtocolError("text message must be a string")
        obj = json.loads(text, parse_constant=_reject_constant)
    except ProtocolError:
        raise
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
        raise ProtocolError(f"invalid JSON: {str(e)[:80]}") from None
    if not isinstance(obj, dict):
        raise ProtocolError("message must be a JSON object")
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in MESSAGE_TYPES:
        raise ProtocolError(f"unknown message type {str(kind)[:40]!r}")
    cls = MESSAGE_TYPES[kind]
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in obj:
            kwargs[f.name] = _check_field(f, obj[f.name], _HINTS[cls][f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ProtocolError(f"{kind}: missing field {f.name!r}")
    return cls(**kwargs)


def encode_message(msg: Message) -> str:
    try:
        body: dict[str, Any] = {"type": msg.TYPE}
        body.update(dataclasses.asdict(msg))
        return json.dumps(body, separators=(",", ":"), allow_nan=False, default=_jsonable)
    except (TypeError, ValueError, RecursionError) as e:
        raise ProtocolError(f"cannot encode {msg.TYPE}: {e}") from None


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def decode(data: str | bytes) -> Message | AudioFrame:
    """One WebSocket message: ``str`` → text message, ``bytes`` → audio frame."""
    if isinstance(data, str):
        return decode_message(data)
    if isinstance(data, (bytes, bytearray, memoryview)):
        return decode_audio(data)
    raise ProtocolError("message must be text or binary")


def check_hello(hello: Hello, *, token: str, max_output_sample_rate: int = MAX_SAMPLE_RATE) -> None:
    """Server-side admission of a hello: version, format, rates, token."""
    if hello.version != VERSION:
        raise ProtocolError(f"unsupported protocol version {hello.version}", CLOSE_PROTOCOL_ERROR)
    if hello.format != FORMAT_PCM16:
        raise ProtocolError(f"unsupported format {hello.format[:40]!r}", CLOSE_BAD_FORMAT)
    if not MIN_SAMPLE_RATE <= hello.sample_rate <= MAX_SAMPLE_RATE:
        raise ProtocolError(
            f"sample_rate {hello.sample_rate} outside {MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE}",
            CLOSE_BAD_FORMAT,
        )
    out = hello.output_sample_rate
    if out != 0 and not MIN_SAMPLE_RATE <= out <= max_output_sample_rate:
        raise ProtocolError(
            f"output_sample_rate {out} outside {MIN_SAMPLE_RATE}-{max_output_sample_rate}",
            CLOSE_BAD_FORMAT,
        )
    if token and hello.token != token:
        raise ProtocolError("missing or wrong token", CLOSE_BAD_AUTH)
