"""The wire protocol's session rules, tested without sockets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.core.wire import protocol as P
from voicepipe.core.wire.session_rules import ClientRules, Phase, ServerLimits, ServerRules

S = 1_000_000_000
HELLO = P.Hello(sample_rate=16000)
AUDIO_IN = P.AudioFrame(kind=P.KIND_AUDIO_IN, seq=0, media_ts=0, pcm=np.zeros(4, np.int16))
AUDIO_OUT = P.AudioFrame(kind=P.KIND_AUDIO_OUT, seq=0, media_ts=0, pcm=np.zeros(4, np.int16))
ACK = P.HelloAck(
    session_id="s",
    pipeline="p",
    input_sample_rate=16000,
    output_sample_rate=22050,
    frame_ms=20,
    max_message_bytes=1,
    idle_timeout_s=1,
)


def _server(token: str = "") -> ServerRules:
    return ServerRules(
        ServerLimits(hello_timeout_ns=5 * S, idle_timeout_ns=60 * S, token=token), now_ns=0
    )


def test_hello_first_then_once() -> None:
    r = _server()
    with pytest.raises(P.ProtocolError, match="first message must be hello"):
        r.receive(AUDIO_IN, 1)
    r = _server()
    assert r.receive(HELLO, 1) is HELLO and r.phase is Phase.OPEN and r.hello is HELLO
    with pytest.raises(P.ProtocolError, match="second hello"):
        r.receive(HELLO, 2)


def test_hello_is_checked() -> None:
    with pytest.raises(P.ProtocolError) as e:
        _server(token="sesame").receive(HELLO, 1)
    assert e.value.code == P.CLOSE_BAD_AUTH
    with pytest.raises(P.ProtocolError) as e:
        _server().receive(P.Hello(sample_rate=4000), 1)
    assert e.value.code == P.CLOSE_BAD_FORMAT


def test_clients_send_only_client_messages_and_audio_in() -> None:
    r = _server()
    r.receive(HELLO, 0)
    assert r.receive(AUDIO_IN, 1) is AUDIO_IN
    with pytest.raises(P.ProtocolError, match="kind 1 only"):
        r.receive(AUDIO_OUT, 2)
    with pytest.raises(P.ProtocolError, match="done is a server message"):
        r.receive(P.Done(), 3)


def test_after_end_stray_audio_is_dropped_but_reports_still_count() -> None:
    r = _server()
    r.receive(HELLO, 0)
    assert isinstance(r.receive(P.EndInput(), 1), P.EndInput)
    assert r.phase is Phase.INPUT_ENDED
    assert r.receive(AUDIO_IN, 2) is None  # a page's microphone may still deliver a frame
    assert r.receive(P.EndInput(), 3) is None
    report = P.Playback(turn_id=1, played_samples=10, sample_rate=16000)
    assert r.receive(report, 4) is report
    assert isinstance(r.receive(P.InterruptMsg(turn_id=1), 5), P.InterruptMsg)


def test_deadlines() -> None:
    r = _server()
    assert r.deadline_ns() == 5 * S
    assert r.expired().code == P.CLOSE_IDLE_TIMEOUT
    assert r.expired().reason == "no hello within 5 s"
    r.receive(HELLO, 2 * S)
    assert r.deadline_ns() == 62 * S
    r.receive(AUDIO_IN, 10 * S)
    assert r.deadline_ns() == 70 * S
    assert r.expired().reason == "nothing received"


def test_client_rules() -> None:
    c = ClientRules()
    with pytest.raises(P.ProtocolError, match="expected hello_ack"):
        ClientRules().receive(AUDIO_OUT)
    refusal = P.Error(code="too_many_sessions", message="x", fatal=True, retry_after_s=5.0)
    assert ClientRules().receive(refusal) is refusal
    assert c.receive(ACK) is ACK and c.ack is ACK
    assert c.receive(AUDIO_OUT) is AUDIO_OUT
    with pytest.raises(P.ProtocolError, match="kind 2 only"):
        c.receive(AUDIO_IN)
    with pytest.raises(P.ProtocolError, match="unexpected hello"):
        c.receive(HELLO)
    with pytest.raises(P.ProtocolError, match="unexpected hello_ack"):
        c.receive(ACK)
    c.receive(P.Done())
    with pytest.raises(P.ProtocolError, match="after done"):
        c.receive(P.Transcript(turn_id=1, text="x"))


_client_msgs = st.sampled_from(
    [
        HELLO,
        AUDIO_IN,
        AUDIO_OUT,
        P.EndInput(),
        P.Done(),
        P.InterruptMsg(turn_id=1),
        P.Playback(turn_id=1, played_samples=0, sample_rate=16000),
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_client_msgs, max_size=12))
def test_any_sequence_either_follows_the_rules_or_raises(msgs: list) -> None:
    """Whatever a client sends: only ProtocolError, never anything else, and an accepted
    session's first message was its (only) hello."""
    r = _server()
    accepted = []
    for t, m in enumerate(msgs):
        try:
            out = r.receive(m, t)
        except P.ProtocolError:
            return
        if out is not None:
            accepted.append(out)
    if accepted:
        assert accepted[0] is HELLO and HELLO not in accepted[1:]
        ended = [i for i, m in enumerate(accepted) if isinstance(m, P.EndInput)]
        assert len(ended) <= 1
        if ended:
            assert not any(isinstance(m, P.AudioFrame) for m in accepted[ended[0] :])
