"""Wire codec: round trips, and every malformed input → ProtocolError (fuzzed)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voicepipe.core.wire import protocol as P

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_audio_round_trip() -> None:
    pcm = np.array([0, 1, -1, 32767, -32768], dtype=np.int16)
    f = P.AudioFrame(
        kind=P.KIND_AUDIO_OUT, seq=7, media_ts=2**40, pcm=pcm, turn_id=3, flags=P.FLAG_LAST
    )
    data = P.encode_audio(f)
    assert len(data) == P.HEADER_BYTES + 2 * len(pcm)
    g = P.decode_audio(data)
    assert (g.kind, g.seq, g.media_ts, g.turn_id, g.last) == (2, 7, 2**40, 3, True)
    np.testing.assert_array_equal(g.pcm, pcm)


def test_audio_header_layout_is_little_endian() -> None:
    f = P.AudioFrame(kind=1, seq=0x01020304, media_ts=5, pcm=np.array([258], dtype=np.int16))
    data = P.encode_audio(f)
    assert data[:2] == bytes([1, 1])
    assert data[4:8] == bytes([4, 3, 2, 1])
    assert data[12:20] == (5).to_bytes(8, "little")
    assert data[20:] == bytes([2, 1])


@pytest.mark.parametrize(
    "data, needle",
    [
        (b"", "shorter"),
        (struct.pack("<BBHIIQ", 2, 1, 0, 0, 0, 0), "version"),
        (struct.pack("<BBHIIQ", 1, 9, 0, 0, 0, 0), "kind"),
        (struct.pack("<BBHIIQ", 1, 1, 4, 0, 0, 0), "flags"),
        (struct.pack("<BBHIIQ", 1, 1, 0, 0, 0, 0) + b"\x00", "odd"),
    ],
)
def test_bad_audio_frames(data: bytes, needle: str) -> None:
    with pytest.raises(P.ProtocolError, match=needle) as e:
        P.decode_audio(data)
    assert e.value.code == P.CLOSE_PROTOCOL_ERROR


def _messages() -> list[P.Message]:
    return [
        P.Hello(sample_rate=16000, token="t", output_sample_rate=24000, client="x"),
        P.InterruptMsg(turn_id=2, reason="stop"),
        P.Playback(
            turn_id=1,
            played_samples=480,
            sample_rate=24000,
            first_play_ms=12.5,
            now_ms=30.0,
            done=True,
            counters={"underruns": 1.0},
        ),
        P.EndInput(),
        P.HelloAck(
            session_id="s1",
            pipeline="loopback",
            input_sample_rate=16000,
            output_sample_rate=22050,
            frame_ms=20,
            max_message_bytes=1 << 20,
            idle_timeout_s=60.0,
        ),
        P.Transcript(turn_id=1, text="hi", final=True, speech_end_ms=1234.5),
        P.ReplyStart(turn_id=1, media_ts=441, sample_rate=22050),
        P.ReplyText(turn_id=1, delta="Hel"),
        P.ReplyEndMsg(turn_id=1, text="Hello", samples=1000, interrupted=False),
        P.Span(turn_id=1, name="llm.ttft", start_ms=1.0, duration_ms=2.5, attrs={"k": [1, "a"]}),
        P.Metrics(turn_id=1, source="llm", values={"accepted": 3.0}),
        P.Error(code="stage_error", message="boom", fatal=True),
        P.AlertMsg(
            turn_id=2,
            kind="timer",
            text="Your 10 minute timer is done.",
            data={"id": "t1", "seconds": 600.0, "label": ""},
        ),  # fmt: skip
        P.Done(),
    ]


@pytest.mark.parametrize("msg", _messages(), ids=lambda m: m.TYPE)
def test_message_round_trip(msg: P.Message) -> None:
    text = P.encode_message(msg)
    assert json.loads(text)["type"] == msg.TYPE
    assert P.decode(text) == msg
    assert P.decode_message(text.encode()) == msg


def test_every_type_is_covered() -> None:
    assert {m.TYPE for m in _messages()} == set(P.MESSAGE_TYPES)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("not json", "invalid JSON"),
        ("[1]", "JSON object"),
        ('{"type":"nope"}', "unknown message type"),
        ('{"sample_rate":1}', "unknown message type"),
        ('{"type":"hello"}', "missing field 'sample_rate'"),
        ('{"type":"hello","sample_rate":"16000"}', "must be an integer"),
        ('{"type":"hello","sample_rate":true}', "must be an integer"),
        ('{"type":"hello","sample_rate":16000.0}', "must be an integer"),
        ('{"type":"hello","sample_rate":1e400}', "must be an integer"),
        ('{"type":"hello","sample_rate":99999999999999999999}', "out of range"),
        (
            '{"type":"playback","turn_id":1,"played_samples":1,"sample_rate":1,"now_ms":Infinity}',
            "not allowed",
        ),
        ('{"type":"metrics","source":"x","values":{"a":"b"}}', "must be a number"),
        ('{"type":"metrics","source":"x","values":[]}', "must be an object"),
        ('{"type":"transcript","turn_id":1,"text":"a","final":1}', "true/false"),
        ("[" * 50000, "invalid JSON"),
    ],
)
def test_bad_messages(text: str, needle: str) -> None:
    with pytest.raises(P.ProtocolError, match=needle):
        P.decode_message(text)


def test_unknown_fields_are_ignored() -> None:
    msg = P.decode_message('{"type":"end","future":{"x":1}}')
    assert msg == P.EndInput()


def test_check_hello() -> None:
    P.check_hello(P.Hello(sample_rate=8000), token="")
    P.check_hello(P.Hello(sample_rate=48000, token="s"), token="s")
    cases = [
        (P.Hello(sample_rate=7999), P.CLOSE_BAD_FORMAT),
        (P.Hello(sample_rate=48001), P.CLOSE_BAD_FORMAT),
        (P.Hello(sample_rate=16000, format="opus"), P.CLOSE_BAD_FORMAT),
        (P.Hello(sample_rate=16000, output_sample_rate=100), P.CLOSE_BAD_FORMAT),
        (P.Hello(sample_rate=16000, version=2), P.CLOSE_PROTOCOL_ERROR),
        (P.Hello(sample_rate=16000), P.CLOSE_BAD_AUTH),
        (P.Hello(sample_rate=16000, token="wrong"), P.CLOSE_BAD_AUTH),
    ]
    for hello, code in cases:
        with pytest.raises(P.ProtocolError) as e:
            P.check_hello(hello, token="s" if code == P.CLOSE_BAD_AUTH else "")
        assert e.value.code == code
        assert P.CLOSE_REASONS[code]


def test_close_reason_fits_a_close_frame() -> None:
    e = P.ProtocolError("é" * 200)
    assert len(e.close_reason.encode()) <= P.MAX_REASON_BYTES


# ---------------------------------------------------------------- fuzzing


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_binary(data: bytes) -> None:
    try:
        frame = P.decode(data)
    except P.ProtocolError as e:
        assert e.code == P.CLOSE_PROTOCOL_ERROR and e.reason
        return
    assert isinstance(frame, P.AudioFrame)
    assert P.encode_audio(frame) == data  # anything accepted re-encodes identically


@FUZZ
@given(st.binary(min_size=20, max_size=60))
def test_fuzz_binary_with_valid_prefix(tail: bytes) -> None:
    data = bytes([1, tail[0] % 3]) + tail[1:]
    try:
        P.decode(data)
    except P.ProtocolError:
        pass


@FUZZ
@given(st.text(max_size=200))
def test_fuzz_text(text: str) -> None:
    try:
        P.decode(text)
    except P.ProtocolError:
        pass


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def message_like(draw: st.DrawFn) -> dict:
    """Objects shaped like real messages: a known type, real field names, random values."""
    kind = draw(st.sampled_from(sorted(P.MESSAGE_TYPES)))
    names = [f for f in P.MESSAGE_TYPES[kind].__dataclass_fields__]
    keys = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    obj = {k: draw(JSON_VALUES) for k in keys}
    obj["type"] = kind
    return obj


@FUZZ
@given(message_like())
def test_fuzz_structured_messages(obj: dict) -> None:
    text = json.dumps(obj)  # NaN/Infinity may appear: they must be rejected too
    try:
        msg = P.decode_message(text)
    except P.ProtocolError:
        return
    assert P.decode_message(P.encode_message(msg)) == msg


@FUZZ
@given(st.binary(max_size=100))
def test_fuzz_text_bytes(data: bytes) -> None:
    try:
        P.decode_message(data)
    except P.ProtocolError:
        pass


def test_deep_nesting_is_a_protocol_error_both_ways() -> None:
    deep = (
        '{"type":"span","turn_id":1,"name":"x","start_ms":0,"duration_ms":1,"attrs":{"a":'
        + "[" * 5000
        + "]" * 5000
        + "}}"
    )
    with pytest.raises(P.ProtocolError):
        P.decode_message(deep)
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(P.ProtocolError):
        P.encode_message(
            P.Span(turn_id=1, name="x", start_ms=0, duration_ms=1, attrs={"a": nested})
        )


_PB = '{"type":"playback","turn_id":1,"played_samples":0,"sample_rate":16000'


@pytest.mark.parametrize(
    "text, needle",
    [
        # The reports a tester sent: finite but absurd times (OverflowError downstream),
        # and counters that turned a global metric into +Inf.
        (_PB + ',"first_play_ms":-1.7e308,"now_ms":1.7e308}', "first_play_ms.*out of range"),
        (_PB + ',"first_play_ms":0,"now_ms":1e12}', "too far apart"),
        (_PB + ',"first_play_ms":1e9,"now_ms":0}', "too far apart"),
        (_PB + ',"counters":{"underruns":1.7e308},"done":true}', "counters.*out of range"),
        (_PB + ',"counters":{"underruns":-1}}', "counters.*out of range"),
        (_PB + ',"counters":{' + ",".join(f'"k{i}":0' for i in range(33)) + "}}", "longer"),
        ('{"type":"playback","turn_id":-1,"played_samples":0,"sample_rate":16000}', "turn_id"),
        (
            '{"type":"playback","turn_id":4294967295,"played_samples":0,"sample_rate":16000}',
            "turn_id",
        ),
        (
            '{"type":"playback","turn_id":1,"played_samples":-5,"sample_rate":16000}',
            "played_samples",
        ),
        ('{"type":"playback","turn_id":1,"played_samples":0,"sample_rate":0}', "sample_rate"),
        ('{"type":"interrupt","turn_id":9007199254740992}', "turn_id"),
        ('{"type":"interrupt","reason":"' + "x" * 300 + '"}', "longer"),
        ('{"type":"hello","sample_rate":16000,"client":"' + "x" * 300 + '"}', "longer"),
    ],
)
def test_client_numbers_are_bounded(text: str, needle: str) -> None:
    with pytest.raises(P.ProtocolError, match=needle):
        P.decode_message(text)


def test_media_ts_is_bounded() -> None:
    ok = P.HEADER.pack(1, P.KIND_AUDIO_IN, 0, 0, 0, P.MAX_MEDIA_TS)
    assert P.decode_audio(ok).media_ts == P.MAX_MEDIA_TS
    with pytest.raises(P.ProtocolError, match="media_ts"):
        P.decode_audio(P.HEADER.pack(1, P.KIND_AUDIO_IN, 0, 0, 0, P.MAX_MEDIA_TS + 1))


@FUZZ
@given(
    turn=st.integers(-10, 2**33),
    played=st.integers(-10, 2**54),
    rate=st.integers(-1, 10**6),
    first=st.one_of(st.none(), st.floats(allow_nan=False)),
    now=st.floats(allow_nan=False),
    counters=st.dictionaries(
        st.sampled_from(["underruns", "concealed_ms", "x"]), st.floats(allow_nan=False)
    ),
)
def test_fuzz_accepted_playback_is_safe_to_use(turn, played, rate, first, now, counters) -> None:
    """Whatever a playback report holds, once decoded the server's arithmetic on it
    (clock mapping to ns, counter deltas) stays finite and within int64."""
    text = json.dumps(
        {
            "type": "playback",
            "turn_id": turn,
            "played_samples": played,
            "sample_rate": rate,
            "first_play_ms": first,
            "now_ms": now,
            "counters": counters,
        }
    )
    try:
        msg = P.decode_message(text)
    except P.ProtocolError:
        return
    assert isinstance(msg, P.Playback)
    if msg.first_play_ms is not None:
        assert abs(round((msg.now_ms - msg.first_play_ms) * 1e6)) < 2**63
    assert all(0 <= v <= P.MAX_COUNTER for v in msg.counters.values())
    assert 0 <= msg.turn_id + 1 < P.U32 and msg.played_samples / msg.sample_rate < 2**63
