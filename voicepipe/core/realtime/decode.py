"""Realtime API client events: text in, typed event out, or a ``RealtimeError``. Sans-I/O.

Every field is checked (type, range, length, base64), and the error names the
offending parameter the way the API does (``param: "session.audio.input.format.rate"``,
``code: "invalid_type" | "invalid_value" | "missing_required_parameter" |
"string_above_max_length" | "unknown_parameter" | "invalid_json" | ...``). Nothing but
``RealtimeError`` ever leaves ``decode_client_event`` (tests fuzz it).

Unknown fields are ignored, as in voicepipe's own protocol, with one exception: the
beta API's session fields (``input_audio_format``, ``turn_detection`` at the top of
``session``, ...) are rejected with ``unknown_parameter``, as the GA API does, because
ignoring them would silently run a session other than the one the client asked for.
Beta *event names* (``response.audio.delta`` and the like) are never sent either:
this endpoint speaks GA only (docs/REALTIME.md).
"""

from __future__ import annotations

import base64
import binascii
import json
import re

from voicepipe.core.realtime.events import (
    CLIENT_EVENT_TYPES,
    ITEM_STATUSES,
    ROLES,
    TOOL_CHOICE_MODES,
    AudioFormat,
    ClientEvent,
    ContentPart,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    InputAudioAppend,
    InputAudioClear,
    InputAudioCommit,
    Item,
    ItemCreate,
    ItemDelete,
    ItemRetrieve,
    ItemTruncate,
    JsonValue,
    MessageItem,
    OutputAudioClear,
    RealtimeError,
    ResponseCancel,
    ResponseCreate,
    ResponseParams,
    SessionPatch,
    SessionUpdate,
    ToolChoice,
    Transcription,
    TurnDetection,
)
from voicepipe.core.realtime.reader import Reader

MAX_AUDIO_BYTES = 15 * 1024 * 1024  # the API's limit for one append
# A whole event: the base64 of 15 MiB of audio plus room for the envelope.
MAX_EVENT_CHARS = 4 * (MAX_AUDIO_BYTES // 3 + 1) + 4096
MAX_ID = 512  # event ids and other client ids (the API limits item ids to 32)
MAX_ITEM_ID = 32
MAX_NAME = 64
MAX_INSTRUCTIONS = 65_536
MAX_TOOLS = 128
MAX_TOOL_JSON = 65_536  # a tool's parameters schema, as JSON text
MAX_CONTENT_PARTS = 32
MAX_TOOL_DEPTH = 32  # nesting of a parameters schema (keeps re-encoding far from recursion limits)
MAX_METADATA = 16  # keys; values ≤ 512 characters, keys ≤ 64 (the API's metadata rules)
MAX_MS = 1 << 40  # a millisecond count (~35 years)
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # function names, as the API requires
_BETA_SESSION_KEYS = {
    "input_audio_format": "audio.input.format",
    "output_audio_format": "audio.output.format",
    "turn_detection": "audio.input.turn_detection",
    "input_audio_transcription": "audio.input.transcription",
    "input_audio_noise_reduction": "audio.input.noise_reduction",
    "voice": "audio.output.voice",
    "modalities": "output_modalities",
    "max_response_output_tokens": "max_output_tokens",
}
# ---------------------------------------------------------------- nested objects


def _audio_format(o: Reader) -> AudioFormat:
    kind = o.string("type", max_len=32, choices=("audio/pcm", "audio/pcmu", "audio/pcma"))
    kind = kind or "audio/pcm"
    rate = o.integer("rate", 1, 1_000_000) if kind == "audio/pcm" else None
    return AudioFormat(
        type=kind, rate=rate if rate is not None else (24000 if kind == "audio/pcm" else None)
    )


def _turn_detection(o: Reader) -> TurnDetection:
    kind = o.req_string("type", max_len=32, choices=("server_vad", "semantic_vad"))
    return TurnDetection(
        type=kind,
        threshold=o.number("threshold", 0.0, 1.0),
        prefix_padding_ms=o.integer("prefix_padding_ms", 0, 10_000),
        silence_duration_ms=o.integer("silence_duration_ms", 0, 10_000),
        idle_timeout_ms=o.integer("idle_timeout_ms", 0, MAX_MS),
        create_response=o.boolean("create_response"),
        interrupt_response=o.boolean("interrupt_response"),
        eagerness=o.string("eagerness", max_len=16, choices=("low", "medium", "high", "auto")),
    )


def _depth(value: object) -> int:
    """Nesting depth of a decoded JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(v, dict):
            stack += [(x, d + 1) for x in v.values()]
        elif isinstance(v, list):
            stack += [(x, d + 1) for x in v]
    return deepest


def _voice(o: Reader) -> str | None:
    """A voice name, or a custom voice given as ``{"id": ...}`` (kept as its id)."""
    if isinstance(o.data.get("voice"), dict):
        vid = o.obj("voice")
        assert vid is not None
        return vid.req_string("id", max_len=MAX_NAME)
    return o.string("voice", max_len=MAX_NAME)


def _tools(o: Reader, key: str) -> tuple[FunctionTool, ...] | None:
    values = o.array(key, MAX_TOOLS)
    if values is None:
        return None
    tools = []
    for i, raw in enumerate(values):
        t = o.element(key, i, raw)
        kind = t.string("type", max_len=32) or "function"
        if kind != "function":  # MCP servers are not something a local pipeline can reach
            raise t.error(
                "unsupported_tool_type",
                f"Tool type '{kind[:32]}' is not supported; only 'function' tools are.",
                "type",
            )
        name = t.req_string("name", max_len=MAX_NAME)
        if not _NAME.match(name):
            raise t.error(
                "invalid_value",
                f"Invalid '{t.param('name')}': a function name is 1-64 "
                "letters, digits, '_' or '-'.",
                "name",
            )
        params = t.obj("parameters")
        schema = params.data if params is not None else {}
        if _depth(schema) > MAX_TOOL_DEPTH:
            raise t.error(
                "invalid_value",
                f"Function parameters schema nested deeper than {MAX_TOOL_DEPTH} levels.",
                "parameters",
            )
        text = json.dumps(schema, separators=(",", ":"))
        if len(text) > MAX_TOOL_JSON:
            raise t.error(
                "string_above_max_length", "Function parameters schema too large.", "parameters"
            )
        tools.append(
            FunctionTool(name=name, description=t.string("description") or "", parameters_json=text)
        )
    return tuple(tools)


def _tool_choice(o: Reader, key: str) -> ToolChoice | None:
    value = o.data.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return ToolChoice(mode=o.req_string(key, max_len=16, choices=TOOL_CHOICE_MODES))
    c = o.obj(key)
    assert c is not None
    c.req_string("type", max_len=16, choices=("function",))
    return ToolChoice(mode="function", name=c.req_string("name", max_len=MAX_NAME))


def _session(o: Reader) -> SessionPatch:
    for beta, ga in _BETA_SESSION_KEYS.items():
        if beta in o.data:
            raise o.error(
                "unknown_parameter",
                f"Unknown parameter: '{o.param(beta)}'. (The GA API has it as 'session.{ga}'.)",
                beta,
            )
    kind = o.req_string("type", max_len=32, choices=("realtime", "transcription"))
    audio = o.obj("audio")
    inp = audio.obj("input") if audio is not None else None
    outp = audio.obj("output") if audio is not None else None
    in_fmt = inp.obj("format") if inp is not None else None
    out_fmt = outp.obj("format") if outp is not None else None
    td_set = inp is not None and "turn_detection" in inp.data
    td = inp.obj("turn_detection") if inp is not None else None
    tr_set = inp is not None and "transcription" in inp.data
    tr = inp.obj("transcription") if inp is not None else None
    if inp is not None and inp.has("noise_reduction"):
        inp.obj("noise_reduction")  # shape only: voicepipe does no noise reduction
    return SessionPatch(
        type=kind,
        model=o.string("model", max_len=MAX_NAME),
        instructions=o.string("instructions", max_len=MAX_INSTRUCTIONS),
        voice=_voice(outp) if outp is not None else None,
        speed=outp.number("speed", 0.25, 1.5) if outp is not None else None,
        input_format=_audio_format(in_fmt) if in_fmt is not None else None,
        output_format=_audio_format(out_fmt) if out_fmt is not None else None,
        turn_detection=_turn_detection(td) if td is not None else None,
        turn_detection_set=td_set,
        transcription=Transcription(
            model=tr.string("model", max_len=MAX_NAME),
            language=tr.string("language", max_len=16),
            prompt=tr.string("prompt", max_len=MAX_INSTRUCTIONS),
        )
        if tr is not None
        else None,
        transcription_set=tr_set,
        tools=_tools(o, "tools"),
        tool_choice=_tool_choice(o, "tool_choice"),
        output_modalities=o.modalities("output_modalities"),
        max_output_tokens=o.max_tokens("max_output_tokens"),
    )


_PART_TYPES = {
    "user": ("input_text", "input_audio", "input_image"),
    "system": ("input_text",),
    "assistant": ("output_text", "output_audio"),
}


def _item(o: Reader) -> Item:
    kind = o.req_string(
        "type", max_len=32, choices=("message", "function_call", "function_call_output")
    )
    item_id = o.string("id", max_len=MAX_ITEM_ID)
    status = o.string("status", max_len=16, choices=ITEM_STATUSES)
    if kind == "function_call_output":
        return FunctionCallOutputItem(
            call_id=o.req_string("call_id", max_len=MAX_ID),
            output=o.req_string("output"),
            id=item_id,
            status=status,
        )
    if kind == "function_call":
        return FunctionCallItem(
            name=o.req_string("name", max_len=MAX_NAME),
            arguments=o.req_string("arguments"),
            call_id=o.string("call_id", max_len=MAX_ID),
            id=item_id,
            status=status,
        )
    role = o.req_string("role", max_len=16, choices=ROLES)
    values = o.array("content", MAX_CONTENT_PARTS, required=True)
    assert values is not None
    parts = []
    for i, raw in enumerate(values):
        c = o.element("content", i, raw)
        ptype = c.req_string("type", max_len=32, choices=_PART_TYPES[role])
        if ptype in ("input_text", "output_text"):
            parts.append(ContentPart(type=ptype, text=c.req_string("text")))
        elif ptype == "output_audio":  # history the client replays: its transcript is the text
            parts.append(ContentPart(type=ptype, transcript=c.string("transcript") or ""))
        else:  # input_audio / input_image: this pipeline hears audio only through the buffer
            raise c.error(
                "unsupported_content_type",
                f"Content type '{ptype}' is not supported "
                "in conversation.item.create; send audio with "
                "input_audio_buffer.append.",
                "type",
            )
    return MessageItem(role=role, content=tuple(parts), id=item_id, status=status)


def _response_params(o: Reader) -> ResponseParams:
    meta = o.obj("metadata")
    metadata: tuple[tuple[str, str], ...] | None = None
    if meta is not None:
        if len(meta.data) > MAX_METADATA or any(len(k) > 64 for k in meta.data):
            raise RealtimeError(
                "invalid_value",
                f"Invalid '{meta.path}': at most {MAX_METADATA} keys of at most 64 characters.",
                param=meta.path,
                event_id=meta.event_id,
            )
        pairs = []
        for k in meta.data:
            pairs.append((k, meta.req_string(k, max_len=512)))
        metadata = tuple(pairs)
    audio = o.obj("audio")
    outp = audio.obj("output") if audio is not None else None
    voice = None
    if outp is not None:
        if outp.has("format"):
            fmt = outp.obj("format")
            assert fmt is not None
            _audio_format(fmt)
        voice = _voice(outp)
    if o.has("input"):
        o.array("input", 1 << 16)
        raise o.error(
            "unsupported_parameter",
            "'response.input' (a response outside the conversation) is not supported.",
            "input",
        )
    return ResponseParams(
        instructions=o.string("instructions", max_len=MAX_INSTRUCTIONS),
        output_modalities=o.modalities("output_modalities"),
        max_output_tokens=o.max_tokens("max_output_tokens"),
        metadata=metadata,
        conversation=o.string("conversation", max_len=MAX_ID),
        tools=_tools(o, "tools"),
        tool_choice=_tool_choice(o, "tool_choice"),
        voice=voice,
    )


def _base64_audio(o: Reader, key: str) -> bytes:
    text = o.req_string(key, max_len=MAX_EVENT_CHARS)
    try:
        audio = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise o.error("invalid_value", "Invalid 'audio': not valid base64.", key) from None
    if len(audio) > MAX_AUDIO_BYTES:
        raise o.error("invalid_value", "Invalid 'audio': more than 15 MiB in one append.", key)
    if len(audio) % 2:
        raise o.error(
            "invalid_value", "Invalid 'audio': PCM16 audio has an even number of bytes.", key
        )
    return audio


# ---------------------------------------------------------------- entry point


def _reject_constant(token: str) -> JsonValue:
    raise ValueError(f"JSON constant {token} is not allowed")


def decode_client_event(data: str | bytes, *, max_chars: int = MAX_EVENT_CHARS) -> ClientEvent:
    """One WebSocket text message → a client event. Raises only ``RealtimeError``."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise RealtimeError("invalid_json", "The event is not valid UTF-8.") from None
    if not isinstance(data, str):
        raise RealtimeError("invalid_json", "An event is a JSON text message.")
    if len(data) > max_chars:
        raise RealtimeError(
            "invalid_value", f"Event too large: {len(data)} characters (at most {max_chars})."
        )
    try:
        raw = json.loads(data, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        raise RealtimeError("invalid_json", f"The event is not valid JSON: {str(e)[:80]}") from None
    if not isinstance(raw, dict):
        raise RealtimeError("invalid_json", "An event must be a JSON object.")
    top = Reader(raw, "", None)
    top.event_id = top.string("event_id", max_len=MAX_ID)  # errors below carry it
    kind = top.req_string("type", max_len=MAX_ID)
    if kind not in CLIENT_EVENT_TYPES:
        listed = ", ".join(f"'{t}'" for t in CLIENT_EVENT_TYPES)
        raise top.error(
            "invalid_value",
            f"Invalid value: '{kind[:64]}'. Supported values are: {listed}.",
            "type",
        )
    eid = top.event_id
    if kind == "session.update":
        s = top.obj("session", required=True)
        assert s is not None
        return SessionUpdate(event_id=eid, session=_session(s))
    if kind == "input_audio_buffer.append":
        return InputAudioAppend(event_id=eid, audio=_base64_audio(top, "audio"))
    if kind == "input_audio_buffer.commit":
        return InputAudioCommit(event_id=eid)
    if kind == "input_audio_buffer.clear":
        return InputAudioClear(event_id=eid)
    if kind == "conversation.item.create":
        it = top.obj("item", required=True)
        assert it is not None
        return ItemCreate(
            event_id=eid,
            item=_item(it),
            previous_item_id=top.string("previous_item_id", max_len=MAX_ID),
        )
    if kind == "conversation.item.truncate":
        audio_end = top.integer("audio_end_ms", 0, MAX_MS, required=True)
        index = top.integer("content_index", 0, MAX_CONTENT_PARTS, required=True)
        assert audio_end is not None and index is not None
        return ItemTruncate(
            event_id=eid,
            item_id=top.req_string("item_id", max_len=MAX_ID),
            content_index=index,
            audio_end_ms=audio_end,
        )
    if kind == "conversation.item.delete":
        return ItemDelete(event_id=eid, item_id=top.req_string("item_id", max_len=MAX_ID))
    if kind == "conversation.item.retrieve":
        return ItemRetrieve(event_id=eid, item_id=top.req_string("item_id", max_len=MAX_ID))
    if kind == "response.create":
        r = top.obj("response")
        return ResponseCreate(event_id=eid, response=_response_params(r) if r is not None else None)
    if kind == "response.cancel":
        return ResponseCancel(event_id=eid, response_id=top.string("response_id", max_len=MAX_ID))
    return OutputAudioClear(event_id=eid)
