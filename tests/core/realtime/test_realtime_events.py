"""Realtime client events: round trips, the SDK's view of them, and every bad shape →
RealtimeError of the API's error shape (fuzzed, as test_protocol.py does for protocol v1)."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.realtime.realtime_sdk import check_client_json, check_server_json
from voicepipe.core.realtime import events as E
from voicepipe.core.realtime.decode import MAX_AUDIO_BYTES, decode_client_event
from voicepipe.core.realtime.server_events import ErrorEvent, encode_server_event

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WEATHER = E.FunctionTool(
    name="get_weather",
    description="Weather in a city",
    parameters_json='{"type":"object","properties":{"city":{"type":"string"}}}',
)


def client_events() -> list[E.ClientEvent]:
    return [
        E.SessionUpdate(
            event_id="evt_1",
            session=E.SessionPatch(
                model="gpt-realtime",
                instructions="Be brief.",
                voice="marin",
                speed=1.2,
                input_format=E.AudioFormat(),
                output_format=E.AudioFormat(),
                turn_detection=E.TurnDetection(
                    threshold=0.6,
                    prefix_padding_ms=200,
                    silence_duration_ms=350,
                    create_response=False,
                    interrupt_response=True,
                ),
                turn_detection_set=True,
                transcription=E.Transcription(model="whisper-1", language="en"),
                transcription_set=True,
                tools=(WEATHER,),
                tool_choice=E.ToolChoice("required"),
                output_modalities=("audio",),
                max_output_tokens=200,
            ),
        ),
        E.SessionUpdate(
            session=E.SessionPatch(
                turn_detection=None,
                turn_detection_set=True,
                tool_choice=E.ToolChoice("function", "get_weather"),
                max_output_tokens="inf",
            )
        ),
        E.SessionUpdate(session=E.SessionPatch(input_format=E.AudioFormat("audio/pcmu", None))),
        E.InputAudioAppend(event_id="a1", audio=bytes(range(256)) * 4),
        E.InputAudioAppend(audio=b""),
        E.InputAudioCommit(event_id="c"),
        E.InputAudioClear(),
        E.ItemCreate(
            event_id="i1",
            item=E.MessageItem(
                role="user",
                content=(E.ContentPart("input_text", text="What's the weather?"),),
                id="msg_1",
            ),
        ),
        E.ItemCreate(
            item=E.MessageItem(
                role="system", content=(E.ContentPart("input_text", text="Speak French."),)
            ),
            previous_item_id="root",
        ),
        E.ItemCreate(
            item=E.MessageItem(
                role="assistant",
                content=(E.ContentPart("output_text", text="Bonjour."),),
                status="completed",
            )
        ),
        E.ItemCreate(
            item=E.FunctionCallOutputItem(call_id="call_1", output='{"temp":21}'),
            previous_item_id="msg_1",
        ),
        E.ItemCreate(
            item=E.FunctionCallItem(
                name="get_weather", arguments='{"city":"Oslo"}', call_id="call_1", id="fc_1"
            )
        ),
        E.ItemTruncate(event_id="t", item_id="item_9", content_index=0, audio_end_ms=1500),
        E.ItemDelete(item_id="item_9"),
        E.ItemRetrieve(item_id="item_9"),
        E.ResponseCreate(),
        E.ResponseCreate(
            event_id="r",
            response=E.ResponseParams(
                instructions="Shout.",
                output_modalities=("text",),
                max_output_tokens=64,
                metadata=(("topic", "weather"),),
                conversation="auto",
                tools=(WEATHER,),
                tool_choice=E.ToolChoice("auto"),
                voice="alloy",
            ),
        ),
        E.ResponseCancel(),
        E.ResponseCancel(event_id="x", response_id="resp_1"),
        E.OutputAudioClear(),
    ]


@pytest.mark.parametrize("ev", client_events(), ids=lambda e: e.TYPE)
def test_client_event_round_trip(ev: E.ClientEvent) -> None:
    text = E.encode_client_event(ev)
    assert decode_client_event(text) == ev
    assert decode_client_event(text.encode()) == ev
    # The SDK reads our JSON as the same event, with no field it does not know ...
    model = check_client_json(text)
    assert model.type == ev.TYPE
    # ... and what the SDK itself would send decodes to the same event.
    assert decode_client_event(model.model_dump_json(exclude_unset=True)) == ev


def test_every_client_type_is_covered() -> None:
    assert {e.TYPE for e in client_events()} == set(E.CLIENT_EVENT_TYPES)


def test_unknown_fields_are_ignored() -> None:
    ev = decode_client_event('{"type":"input_audio_buffer.commit","future":{"x":[1]}}')
    assert ev == E.InputAudioCommit()
    ev = decode_client_event(
        '{"type":"session.update","session":{"type":"realtime",'
        '"tracing":"auto","truncation":"auto","include":[],"zz":1}}'
    )
    assert ev == E.SessionUpdate(session=E.SessionPatch())


def test_custom_voice_object_is_its_id() -> None:
    ev = decode_client_event(
        '{"type":"session.update","session":{"type":"realtime",'
        '"audio":{"output":{"voice":{"id":"voice_1234"}}}}}'
    )
    assert isinstance(ev, E.SessionUpdate) and ev.session.voice == "voice_1234"


_S = '{"type":"session.update","event_id":"ev7","session":'
_BIG = base64.b64encode(bytes(MAX_AUDIO_BYTES + 2)).decode()


@pytest.mark.parametrize(
    "text, code, param",
    [
        ("not json", "invalid_json", None),
        ("[1]", "invalid_json", None),
        ('{"type":"x","event_id":"e"}', "invalid_value", "type"),
        ('{"event_id":"e"}', "missing_required_parameter", "type"),
        ('{"type":5}', "invalid_type", "type"),
        ('{"type":"session.update","event_id":5}', "invalid_type", "event_id"),
        ('{"type":"session.update"}', "missing_required_parameter", "session"),
        (_S + "{}}", "missing_required_parameter", "session.type"),
        (
            _S + '{"type":"realtime","input_audio_format":"pcm16"}}',
            "unknown_parameter",
            "session.input_audio_format",
        ),
        (
            _S + '{"type":"realtime","turn_detection":null}}',
            "unknown_parameter",
            "session.turn_detection",
        ),
        (
            _S + '{"type":"realtime","audio":{"input":{"format":{"type":"mp3"}}}}}',
            "invalid_value",
            "session.audio.input.format.type",
        ),
        (
            _S + '{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcm",'
            '"rate":"24000"}}}}}',
            "invalid_type",
            "session.audio.input.format.rate",
        ),
        (
            _S + '{"type":"realtime","audio":{"input":{"turn_detection":{"type":"server_vad",'
            '"threshold":1.5}}}}}',
            "invalid_value",
            "session.audio.input.turn_detection.threshold",
        ),
        (
            _S + '{"type":"realtime","audio":{"input":{"turn_detection":{"type":"server_vad",'
            '"silence_duration_ms":-1}}}}}',
            "invalid_value",
            "session.audio.input.turn_detection.silence_duration_ms",
        ),
        (
            _S + '{"type":"realtime","audio":{"input":{"turn_detection":{"threshold":0.5}}}}}',
            "missing_required_parameter",
            "session.audio.input.turn_detection.type",
        ),
        (
            _S + '{"type":"realtime","audio":{"output":{"speed":9}}}}',
            "invalid_value",
            "session.audio.output.speed",
        ),
        (_S + '{"type":"realtime","audio":"x"}}', "invalid_type", "session.audio"),
        (
            _S + '{"type":"realtime","tools":[{"type":"mcp","server_label":"x"}]}}',
            "unsupported_tool_type",
            "session.tools[0].type",
        ),
        (
            _S + '{"type":"realtime","tools":[{"type":"function","name":"a b"}]}}',
            "invalid_value",
            "session.tools[0].name",
        ),
        (_S + '{"type":"realtime","tools":[7]}}', "invalid_type", "session.tools[0]"),
        (
            _S
            + '{"type":"realtime","tools":[{"name":"f","parameters":{"a":'
            + "[" * 40
            + "]" * 40
            + "}}]}}",
            "invalid_value",
            "session.tools[0].parameters",
        ),
        (
            _S + '{"type":"realtime","tool_choice":"sometimes"}}',
            "invalid_value",
            "session.tool_choice",
        ),
        (
            _S + '{"type":"realtime","output_modalities":["video"]}}',
            "invalid_value",
            "session.output_modalities[0]",
        ),
        (
            _S + '{"type":"realtime","max_output_tokens":0}}',
            "invalid_value",
            "session.max_output_tokens",
        ),
        (
            _S + '{"type":"realtime","max_output_tokens":"lots"}}',
            "invalid_value",
            "session.max_output_tokens",
        ),
        (
            _S + '{"type":"realtime","instructions":"' + "x" * 70000 + '"}}',
            "string_above_max_length",
            "session.instructions",
        ),
        ('{"type":"input_audio_buffer.append"}', "missing_required_parameter", "audio"),
        ('{"type":"input_audio_buffer.append","audio":"***"}', "invalid_value", "audio"),
        ('{"type":"input_audio_buffer.append","audio":"AA=="}', "invalid_value", "audio"),
        ('{"type":"input_audio_buffer.append","audio":"' + _BIG + '"}', "invalid_value", "audio"),
        ('{"type":"input_audio_buffer.append","audio":[1,2]}', "invalid_type", "audio"),
        ('{"type":"conversation.item.create"}', "missing_required_parameter", "item"),
        (
            '{"type":"conversation.item.create","item":{"type":"message","role":"user",'
            '"content":[{"type":"input_audio","audio":"AAAA"}]}}',
            "unsupported_content_type",
            "item.content[0].type",
        ),
        (
            '{"type":"conversation.item.create","item":{"type":"message","role":"user",'
            '"content":[{"type":"output_text","text":"x"}]}}',
            "invalid_value",
            "item.content[0].type",
        ),
        (
            '{"type":"conversation.item.create","item":{"type":"message","role":"robot",'
            '"content":[]}}',
            "invalid_value",
            "item.role",
        ),
        (
            '{"type":"conversation.item.create","item":{"type":"message","role":"user"}}',
            "missing_required_parameter",
            "item.content",
        ),
        (
            '{"type":"conversation.item.create","item":{"type":"function_call_output",'
            '"output":"x"}}',
            "missing_required_parameter",
            "item.call_id",
        ),
        (
            '{"type":"conversation.item.create","item":{"type":"message","role":"user","id":"'
            + "i" * 33
            + '","content":[]}}',
            "string_above_max_length",
            "item.id",
        ),
        (
            '{"type":"conversation.item.truncate","item_id":"a","content_index":0,'
            '"audio_end_ms":-5}',
            "invalid_value",
            "audio_end_ms",
        ),
        (
            '{"type":"conversation.item.truncate","item_id":"a","content_index":0,'
            '"audio_end_ms":1.5}',
            "invalid_type",
            "audio_end_ms",
        ),
        (
            '{"type":"conversation.item.truncate","item_id":"a","content_index":true,'
            '"audio_end_ms":1}',
            "invalid_type",
            "content_index",
        ),
        (
            '{"type":"conversation.item.truncate","content_index":0,"audio_end_ms":1}',
            "missing_required_parameter",
            "item_id",
        ),
        (
            '{"type":"response.create","response":{"input":[]}}',
            "unsupported_parameter",
            "response.input",
        ),
        (
            '{"type":"response.create","response":{"metadata":{"k":5}}}',
            "invalid_type",
            "response.metadata.k",
        ),
        (
            '{"type":"response.create","response":{"metadata":{'
            + ",".join(f'"k{i}":"v"' for i in range(17))
            + "}}}",
            "invalid_value",
            "response.metadata",
        ),
        ('{"type":"response.cancel","response_id":1}', "invalid_type", "response_id"),
        ('{"type":"response.create","x":NaN}', "invalid_json", None),
        ("[" * 100000, "invalid_json", None),
    ],
)
def test_bad_events(text: str, code: str, param: str | None) -> None:
    with pytest.raises(E.RealtimeError) as info:
        decode_client_event(text)
    err = info.value
    assert (err.code, err.param) == (code, param), err.message
    assert err.type == "invalid_request_error" and err.message
    raw = json.loads(text) if code != "invalid_json" else None
    if isinstance(raw, dict) and isinstance(raw.get("event_id"), str):
        assert err.event_id == raw["event_id"]  # the client can tell which event failed
    check_server_json(encode_server_event(ErrorEvent(event_id="event_1", error=err)))


def test_error_event_shape() -> None:
    err = E.RealtimeError("invalid_value", "bad", param="session.type", event_id="ev7")
    assert json.loads(encode_server_event(ErrorEvent(event_id="event_9", error=err))) == {
        "type": "error",
        "event_id": "event_9",
        "error": {
            "type": "invalid_request_error",
            "code": "invalid_value",
            "message": "bad",
            "param": "session.type",
            "event_id": "ev7",
        },
    }


def test_oversized_event_is_refused_before_parsing() -> None:
    with pytest.raises(E.RealtimeError, match="too large"):
        decode_client_event('{"type":"response.create"}' + " " * 100, max_chars=50)


# ---------------------------------------------------------------- fuzzing

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _check_outcome(text: str | bytes) -> None:
    """Decoding yields an event that re-encodes to itself, or a RealtimeError: nothing else."""
    try:
        ev = decode_client_event(text)
    except E.RealtimeError as err:
        assert err.code and err.message and err.type == "invalid_request_error"
        json.dumps(err.to_json())
        return
    assert decode_client_event(E.encode_client_event(ev)) == ev


@FUZZ
@given(st.text(max_size=200))
def test_fuzz_text(text: str) -> None:
    _check_outcome(text)


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_bytes(data: bytes) -> None:
    _check_outcome(data)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(obj: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        obj = dict(obj)
        if delete and not rest:
            obj.pop(head, None)
        else:
            obj[head] = _mutate(obj[head], rest, new, delete)
    else:
        obj = list(obj)
        if delete and not rest:
            obj.pop(head)
        else:
            obj[head] = _mutate(obj[head], rest, new, delete)
    return obj


VALID = [E.encode_client_event(e) for e in client_events()]


@st.composite
def mutated_events(draw: st.DrawFn) -> str:
    """A real event with one value (at any depth) replaced by random JSON, or removed."""
    obj = json.loads(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(obj)
        path = draw(st.sampled_from(paths[1:] or paths))
        obj = _mutate(obj, path, draw(JSON_VALUES), draw(st.booleans()))
    return json.dumps(obj)  # NaN/Infinity may appear: they must be rejected too


@FUZZ
@given(mutated_events())
def test_fuzz_mutated_events(text: str) -> None:
    _check_outcome(text)


def test_fuzz_truncated_events() -> None:
    rng = random.Random(7)
    for text in VALID:
        for _ in range(20):
            _check_outcome(text[: rng.randrange(len(text))])
