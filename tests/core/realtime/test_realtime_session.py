"""RealtimeSession: event sequences of VAD turns, manual turns, responses, barge-in
(cancel + truncate → heard), tools; every server event it emits parses with the
official SDK; no input sequence makes it raise (fuzzed)."""

from __future__ import annotations

import base64
import dataclasses
import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.realtime.realtime_sdk import check_server_json
from tests.core.realtime.test_realtime_events import VALID, mutated_events
from voicepipe.config import VadConfig
from voicepipe.core.realtime import api as R
from voicepipe.core.realtime import server_events as S
from voicepipe.core.turns.heard import SpokenReply

MS = R.BYTES_PER_MS


class Run:
    """A session plus everything it said, each server event checked against the SDK."""

    def __init__(self, **kw: Any) -> None:
        self.s = R.RealtimeSession(session_id="sess_test", instructions="Be brief.", **kw)
        self.event_ids: set[str] = set()
        self.types: set[str] = set()

    def __call__(self, outs: list[R.Out]) -> list[R.Out]:
        for o in outs:
            if isinstance(o, S.ServerEvent):
                check_server_json(S.encode_server_event(o))
                assert o.event_id not in self.event_ids  # server event ids are unique
                self.event_ids.add(o.event_id)
                self.types.add(o.TYPE)
        return outs

    def send(self, event: dict[str, Any]) -> list[R.Out]:
        return self(self.s.receive(json.dumps(event)))


def types(outs: list[R.Out]) -> list[str]:
    return [o.TYPE if isinstance(o, S.ServerEvent) else type(o).__name__ for o in outs]


def only(outs: list[R.Out], cls: type) -> Any:
    found = [o for o in outs if isinstance(o, cls)]
    assert len(found) == 1, types(outs)
    return found[0]


def error_of(outs: list[R.Out]) -> R.RealtimeError:
    ev = only(outs, S.ErrorEvent)
    assert types(outs) == ["error"]  # a refused event changes nothing else
    return ev.error


def pcm(ms: int) -> bytes:
    return bytes(ms * MS)


def vad_turn(run: Run, start_ms: int = 100, end_ms: int = 900) -> tuple[str, str]:
    """A user turn through server VAD; returns (user item id, response id)."""
    run.send({"type": "input_audio_buffer.append", "audio": "AAAA" * 100})
    started = only(run(run.s.speech_started(start_ms)), S.SpeechStarted)
    outs = run(run.s.speech_stopped(end_ms))
    assert types(outs) == [
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.created",
        "conversation.item.done",
        "response.created",
        "StartResponse",
    ]
    assert only(outs, S.SpeechStopped).item_id == started.item_id
    start = only(outs, R.StartResponse)
    assert start.after_item_id == started.item_id and start.instructions == "Be brief."
    return started.item_id, start.response_id


def test_created_first() -> None:
    run = Run()
    outs = run(run.s.start())
    assert types(outs) == ["session.created", "Configure"]
    session = json.loads(S.encode_server_event(outs[0]))["session"]  # type: ignore[arg-type]
    assert session["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert session["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    assert session["instructions"] == "Be brief."


def test_a_discarded_turn_commits_nothing() -> None:
    run = Run()
    started = only(run(run.s.speech_started(100)), S.SpeechStarted)
    outs = run(run.s.speech_discarded(180))  # a cough: the endpointer did not accept it
    assert types(outs) == ["input_audio_buffer.speech_stopped"]
    assert only(outs, S.SpeechStopped).item_id == started.item_id
    assert run(run.s.speech_stopped(400)) == [] and run.s.conversation.order == []


def test_vad_turn_response_and_transcript() -> None:
    run = Run()
    item_id, resp_id = vad_turn(run)
    done = run(run.s.transcript_done(item_id, "what time is it"))
    ev = only(done, S.TranscriptionCompleted)
    assert ev.transcript == "what time is it" and ev.usage.seconds == 0.8
    retrieved = only(
        run.send({"type": "conversation.item.retrieve", "item_id": item_id}), S.ItemRetrieved
    )
    assert retrieved.item.content[0].transcript == "what time is it"

    outs = run(run.s.output_text("It is noon."))
    assert types(outs) == [
        "response.output_item.added",
        "conversation.item.added",
        "conversation.item.created",
        "response.content_part.added",
        "response.output_audio_transcript.delta",
    ]
    outs = run(run.s.output_audio(pcm(500)))
    assert types(outs) == ["response.output_audio.delta"]
    assert len(only(outs, S.OutputAudioDelta).delta) == 500 * MS
    run.s.note_usage(S.Usage(input_text_tokens=30, output_text_tokens=5))
    outs = run(run.s.response_finished())
    assert types(outs) == [
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    resp = only(outs, S.ResponseDone).response
    assert (resp.id, resp.status, resp.usage) == (
        resp_id,
        "completed",
        S.Usage(input_text_tokens=30, output_text_tokens=5),
    )
    assert resp.output[0].content[0].transcript == "It is noon."
    assert run.s.response is None
    assert run(run.s.output_audio(pcm(20))) == []  # nothing belongs to a finished response


def test_barge_in_cancels_then_truncate_keeps_what_was_heard() -> None:
    run = Run()
    vad_turn(run)
    chunks = [("Hello there.", 1000), ("How are you today?", 2000)]
    for text, ms in chunks:
        run(run.s.output_text(text + " "))
        run(run.s.output_audio(pcm(ms), spoken_text=text))
    item_id = run.s.response.cur.id  # type: ignore[union-attr]
    outs = run(run.s.speech_started(5000))  # the user talks over the reply
    assert types(outs)[:2] == ["input_audio_buffer.speech_started", "CancelResponse"]
    assert only(outs, R.CancelResponse).reason == "turn_detected"
    done = only(outs, S.ResponseDone).response
    assert (done.status, done.reason) == ("cancelled", "turn_detected")
    assert done.output[0].status == "incomplete"
    assert run(run.s.output_audio(pcm(40))) == []  # late audio of the cancelled reply: dropped

    outs = run.send(
        {
            "type": "conversation.item.truncate",
            "item_id": item_id,
            "content_index": 0,
            "audio_end_ms": 2000,
            "event_id": "tr1",
        }
    )
    heard = only(outs, R.SetHeard)
    expected = SpokenReply([(t, ms / 1000) for t, ms in chunks]).heard(2.0)
    assert heard.text == expected == "Hello there. How are"
    assert heard.item_id == item_id and heard.audio_end_ms == 2000
    assert only(outs, S.ItemTruncated).audio_end_ms == 2000
    item = only(
        run.send({"type": "conversation.item.retrieve", "item_id": item_id}), S.ItemRetrieved
    ).item
    assert item.content[0].transcript == "Hello there. How are"
    # Now only 2000 ms of audio remain: a later truncate cannot reach past them.
    err = error_of(
        run.send(
            {
                "type": "conversation.item.truncate",
                "item_id": item_id,
                "content_index": 0,
                "audio_end_ms": 2500,
                "event_id": "tr2",
            }
        )
    )
    assert (err.code, err.param, err.event_id) == ("invalid_value", "audio_end_ms", "tr2")


def test_truncate_spreads_words_when_audio_is_not_attributed() -> None:
    run = Run()
    vad_turn(run)
    run(run.s.output_text("one two three four"))
    run(run.s.output_audio(pcm(2000)))
    item_id = run.s.response.cur.id  # type: ignore[union-attr]
    run(run.s.response_finished())
    outs = run.send(
        {
            "type": "conversation.item.truncate",
            "item_id": item_id,
            "content_index": 0,
            "audio_end_ms": 1000,
        }
    )
    assert only(outs, R.SetHeard).text == "one two"
    assert "CancelResponse" not in types(outs)  # the response had already finished


def test_truncate_of_the_reply_in_progress_cancels_it() -> None:
    run = Run()
    _, resp_id = vad_turn(run)
    run(run.s.output_text("a b c d"))
    run(run.s.output_audio(pcm(1000)))
    item_id = run.s.response.cur.id  # type: ignore[union-attr]
    outs = run.send(
        {
            "type": "conversation.item.truncate",
            "item_id": item_id,
            "content_index": 0,
            "audio_end_ms": 500,
        }
    )
    assert types(outs)[0] == "CancelResponse"
    assert only(outs, S.ResponseDone).response.reason == "client_cancelled"
    assert only(outs, R.SetHeard).text == "a b"


def test_truncate_errors() -> None:
    run = Run()
    user_id, _ = vad_turn(run)
    err = error_of(
        run.send(
            {
                "type": "conversation.item.truncate",
                "item_id": "nope",
                "content_index": 0,
                "audio_end_ms": 0,
            }
        )
    )
    assert (err.code, err.param) == ("item_truncate_invalid_item_id", "item_id")
    err = error_of(
        run.send(
            {
                "type": "conversation.item.truncate",
                "item_id": user_id,
                "content_index": 0,
                "audio_end_ms": 0,
            }
        )
    )
    assert err.code == "unsupported_content_type"
    run(run.s.output_audio(pcm(100)))
    item_id = run.s.response.cur.id  # type: ignore[union-attr]
    err = error_of(
        run.send(
            {
                "type": "conversation.item.truncate",
                "item_id": item_id,
                "content_index": 1,
                "audio_end_ms": 0,
            }
        )
    )
    assert err.param == "content_index"
    assert run.s.response is not None  # a refused truncate cancels nothing


def test_manual_turns() -> None:
    run = Run()
    outs = run.send(
        {
            "type": "session.update",
            "session": {"type": "realtime", "audio": {"input": {"turn_detection": None}}},
        }
    )
    assert only(outs, R.Configure).config.turn_detection is None
    assert only(outs, R.Configure).config.vad_overrides() == {}
    assert run(run.s.speech_started(10)) == [] and run(run.s.speech_stopped(900)) == []
    run.send({"type": "input_audio_buffer.append", "audio": "AAAA" * 400})  # 50 ms
    err = error_of(run.send({"type": "input_audio_buffer.commit", "event_id": "c1"}))
    assert (err.code, err.event_id) == ("input_audio_buffer_commit_empty", "c1")
    outs = run.send(
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm(100)).decode()}
    )
    assert types(outs) == ["AppendAudio"] and len(outs[0].pcm) == 100 * MS  # type: ignore
    outs = run.send({"type": "input_audio_buffer.commit"})
    assert types(outs) == [
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.created",
        "conversation.item.done",
        "CommitAudio",
    ]
    assert "response.created" not in types(outs)  # manual turns answer on response.create
    outs = run.send({"type": "response.create", "response": {"instructions": "Whisper."}})
    assert types(outs) == ["response.created", "StartResponse"]
    assert only(outs, R.StartResponse).instructions == "Whisper."
    err = error_of(run.send({"type": "response.create"}))
    assert err.code == "conversation_already_has_active_response"
    outs = run.send({"type": "response.cancel"})
    assert types(outs) == ["CancelResponse", "response.done"]
    assert only(outs, S.ResponseDone).response.reason == "client_cancelled"
    assert error_of(run.send({"type": "response.cancel"})).code == "response_cancel_not_active"
    outs = run.send({"type": "input_audio_buffer.clear"})
    assert types(outs) == ["ClearAudio", "input_audio_buffer.cleared"]


def test_session_update_maps_vad_knobs_onto_the_config() -> None:
    run = Run()
    outs = run.send(
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "instructions": "Talk like a pirate.",
                "audio": {
                    "input": {
                        "turn_detection": {
                            "type": "server_vad",
                            "threshold": 0.7,
                            "silence_duration_ms": 250,
                        }
                    },
                    "output": {"voice": "cedar"},
                },
                "tools": [
                    {"type": "function", "name": "get_time", "parameters": {"type": "object"}}
                ],
                "max_output_tokens": 100,
            },
        }
    )
    cfg = only(outs, R.Configure).config
    updated = only(outs, S.SessionUpdated).session
    assert cfg == updated and cfg.instructions == "Talk like a pirate."
    assert cfg.voice == "cedar" and cfg.max_output_tokens == 100
    assert cfg.tools[0].name == "get_time"
    assert cfg.turn_detection is not None and cfg.turn_detection.prefix_padding_ms == 300
    overrides = cfg.vad_overrides()
    assert overrides == {"threshold": 0.7, "end_silence_ms": 250}
    vad = dataclasses.replace(VadConfig(), **overrides)  # they are [vad] fields
    assert (vad.threshold, vad.end_silence_ms) == (0.7, 250)
    # Fields left out keep their values.
    cfg2 = only(
        run.send({"type": "session.update", "session": {"type": "realtime"}}), R.Configure
    ).config
    assert cfg2 == cfg


def test_semantic_vad_maps_its_eagerness_onto_the_endpointer() -> None:
    run = Run()
    assert only(run(run.s.start()), R.Configure).config.eagerness() == "off"  # server_vad

    def update(td: dict[str, Any]) -> R.SessionConfig:
        session = {"type": "realtime", "audio": {"input": {"turn_detection": td}}}
        outs = run.send({"type": "session.update", "session": session})
        cfg = only(outs, R.Configure).config
        assert cfg == only(outs, S.SessionUpdated).session
        return cfg

    cfg = update({"type": "semantic_vad", "eagerness": "high"})
    td = cfg.turn_detection
    assert td is not None and (td.type, td.eagerness) == ("semantic_vad", "high")
    assert td.create_response and td.interrupt_response
    assert cfg.eagerness() == "high" and cfg.vad_overrides() == {}
    wire = json.loads(S.encode_server_event(S.SessionUpdated(event_id="e", session=cfg)))
    assert wire["session"]["audio"]["input"]["turn_detection"] == {
        "type": "semantic_vad",
        "create_response": True,
        "interrupt_response": True,
        "eagerness": "high",
    }
    assert update({"type": "semantic_vad"}).eagerness() == "auto"
    back = update({"type": "server_vad", "silence_duration_ms": 300})
    assert back.eagerness() == "off" and back.vad_overrides()["end_silence_ms"] == 300
    cfg = update({"type": "semantic_vad", "eagerness": "low", "create_response": False})
    assert cfg.turn_detection is not None and not cfg.turn_detection.create_response
    assert cfg.eagerness() == "low"


def test_session_update_refusals() -> None:
    run = Run()

    def refused(session: dict[str, Any]) -> R.RealtimeError:
        return error_of(
            run.send(
                {
                    "type": "session.update",
                    "event_id": "u",
                    "session": {"type": "realtime", **session},
                }
            )
        )

    err = refused({"audio": {"input": {"format": {"type": "audio/pcmu"}}}})
    assert (err.code, err.param, err.event_id) == (
        "invalid_value",
        "session.audio.input.format",
        "u",
    )
    err = refused({"audio": {"output": {"format": {"type": "audio/pcm", "rate": 16000}}}})
    assert err.param == "session.audio.output.format"
    assert refused({"output_modalities": ["text", "audio"]}).param == "session.output_modalities"
    assert (
        error_of(run.send({"type": "session.update", "session": {"type": "transcription"}})).param
        == "session.type"
    )
    vad_turn(run)
    run(run.s.output_audio(pcm(20)))
    assert refused({"audio": {"output": {"voice": "ash"}}}).code == "cannot_update_voice"
    assert run.s.config.voice == "alloy"


def test_text_only_responses() -> None:
    run = Run()
    run.send(
        {
            "type": "conversation.item.create",
            "item": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
            },
        }
    )
    run.send({"type": "response.create", "response": {"output_modalities": ["text"]}})
    outs = run(run.s.output_text("Hello!"))
    assert types(outs)[-1] == "response.output_text.delta"
    assert run(run.s.output_audio(pcm(20))) == []
    outs = run(run.s.response_finished())
    assert types(outs)[:2] == ["response.output_text.done", "response.content_part.done"]
    assert only(outs, S.ResponseDone).response.output[0].content[0].text == "Hello!"


def test_function_call_round() -> None:
    run = Run()
    run.send(
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "tools": [
                    {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
                ],
            },
        }
    )
    vad_turn(run)
    outs = run(run.s.function_call("get_weather", '{"city":"Oslo"}', call_id="call_7"))
    assert types(outs) == [
        "response.output_item.added",
        "conversation.item.added",
        "conversation.item.created",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "conversation.item.done",
    ]
    args = only(outs, S.FunctionArgumentsDone)
    assert (args.name, args.arguments, args.call_id) == ("get_weather", '{"city":"Oslo"}', "call_7")
    resp = only(run(run.s.response_finished()), S.ResponseDone).response
    assert resp.output[0].TYPE == "function_call" and resp.output[0].status == "completed"
    outs = run.send(
        {
            "type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": "call_7", "output": '{"temp": 21}'},
        }
    )
    add = only(outs, R.AddItem)
    assert add.item.output == '{"temp": 21}' and add.item.id  # type: ignore[union-attr]
    assert types(run.send({"type": "response.create"})) == ["response.created", "StartResponse"]


def test_items_order_delete_retrieve() -> None:
    run = Run()
    msg = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]}
    first = only(
        run.send({"type": "conversation.item.create", "item": {**msg, "id": "m1"}}), S.ItemAdded
    )
    assert first.previous_item_id is None
    outs = run.send(
        {
            "type": "conversation.item.create",
            "item": {**msg, "id": "m0"},
            "previous_item_id": "root",
        }
    )
    assert only(outs, S.ItemAdded).previous_item_id is None
    assert run.s.conversation.order == ["m0", "m1"]
    outs = run.send({"type": "conversation.item.create", "item": msg, "previous_item_id": "m0"})
    assert only(outs, S.ItemAdded).previous_item_id == "m0"
    assert (
        error_of(run.send({"type": "conversation.item.create", "item": {**msg, "id": "m1"}})).param
        == "item.id"
    )
    assert (
        error_of(
            run.send({"type": "conversation.item.create", "item": msg, "previous_item_id": "zz"})
        ).code
        == "invalid_item_id"
    )
    assert types(run.send({"type": "conversation.item.delete", "item_id": "m1"})) == [
        "DeleteItem",
        "conversation.item.deleted",
    ]
    assert (
        error_of(run.send({"type": "conversation.item.delete", "item_id": "m1"})).code
        == "item_delete_invalid_item_id"
    )
    assert (
        error_of(run.send({"type": "conversation.item.retrieve", "item_id": "m1"})).code
        == "item_retrieve_invalid_item_id"
    )
    assert error_of(run.send({"type": "output_audio_buffer.clear"})).code == "unsupported_event"


def test_incomplete_and_failed_responses() -> None:
    run = Run()
    vad_turn(run)
    run(run.s.output_text("and then"))
    resp = only(
        run(run.s.response_finished(incomplete_reason="max_output_tokens")), S.ResponseDone
    ).response
    assert (resp.status, resp.reason, resp.output[0].status) == (
        "incomplete",
        "max_output_tokens",
        "incomplete",
    )
    run.send({"type": "response.create"})
    resp = only(run(run.s.response_failed("the LLM stage failed")), S.ResponseDone).response
    assert resp.status == "failed" and resp.error is not None
    assert resp.error.type == "server_error"


def test_transcription_events_follow_the_config() -> None:
    run = Run()
    item_id, _ = vad_turn(run)
    assert types(run(run.s.transcript_delta(item_id, "what"))) == [
        "conversation.item.input_audio_transcription.delta"
    ]
    assert types(run(run.s.transcript_failed(item_id, "no speech"))) == [
        "conversation.item.input_audio_transcription.failed"
    ]
    run.send(
        {
            "type": "session.update",
            "session": {"type": "realtime", "audio": {"input": {"transcription": None}}},
        }
    )
    assert run(run.s.transcript_delta(item_id, "x")) == []
    assert run(run.s.transcript_done(item_id, "what")) == []  # the item still gets it
    assert run.s.conversation.items[item_id].content[0].transcript == "what"  # type: ignore


def test_legacy_item_created_can_be_turned_off() -> None:
    run = Run(legacy_item_created=False)
    run.send(
        {
            "type": "conversation.item.create",
            "item": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "a"}],
            },
        }
    )
    assert "conversation.item.created" not in run.types


def test_every_server_event_type_is_emitted_somewhere() -> None:
    """One session walks through everything; each type it emits was checked by the SDK."""
    run = Run()
    run(run.s.start())
    run.send({"type": "session.update", "session": {"type": "realtime"}})
    run.send({"type": "nope"})
    item_id, _ = vad_turn(run)
    run(run.s.transcript_delta(item_id, "hi"))
    run(run.s.transcript_done(item_id, "hi"))
    run(run.s.transcript_failed(item_id, "x"))
    run(run.s.output_text("Hello."))
    run(run.s.output_audio(pcm(100)))
    run(run.s.function_call("f", "{}"))
    run(run.s.response_finished())
    assistant = next(i for i in run.s.conversation.order if i in run.s.conversation.spoken)
    run.send(
        {
            "type": "conversation.item.truncate",
            "item_id": assistant,
            "content_index": 0,
            "audio_end_ms": 50,
        }
    )
    run.send({"type": "conversation.item.retrieve", "item_id": assistant})
    run.send({"type": "conversation.item.delete", "item_id": assistant})
    run.send({"type": "input_audio_buffer.clear"})
    run.send({"type": "response.create", "response": {"output_modalities": ["text"]}})
    run(run.s.output_text("ok"))
    run(run.s.response_finished())
    assert run.types == set(R.SERVER_EVENT_TYPES)


# ---------------------------------------------------------------- fuzzing

_PIPELINE = st.one_of(
    st.tuples(st.just("speech_started"), st.integers(-10, 10**6)),
    st.tuples(st.just("speech_stopped"), st.integers(-10, 10**6)),
    st.tuples(st.just("speech_discarded"), st.integers(-10, 10**6)),
    st.tuples(st.just("output_text"), st.text(max_size=12)),
    st.tuples(st.just("output_audio"), st.integers(0, 2000)),
    st.tuples(st.just("function_call"), st.text(max_size=8)),
    st.tuples(st.just("response_finished"), st.sampled_from([None, "max_output_tokens"])),
    st.tuples(st.just("response_failed"), st.text(max_size=8)),
    st.tuples(st.just("transcript_done"), st.text(max_size=8)),
)
_CLIENT = st.one_of(mutated_events(), st.sampled_from(VALID), st.text(max_size=40))


def _pipeline(run: Run, op: tuple[str, Any]) -> list[R.Out]:
    name, arg = op
    s = run.s
    if name == "output_audio":
        return s.output_audio(bytes(2 * arg))
    if name == "function_call":
        return s.function_call("f", arg)
    if name == "response_finished":
        return s.response_finished(incomplete_reason=arg)
    if name == "transcript_done":
        return s.transcript_done(s.conversation.last_id() or "x", arg)
    return getattr(s, name)(arg)  # type: ignore[no-any-return]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_CLIENT, _PIPELINE), max_size=25))
def test_fuzz_sessions_never_raise(steps: list[Any]) -> None:
    """Any mix of client events (valid, mutated, garbage) and pipeline happenings: the session
    never raises, every event it emits is one the SDK parses, and at most one response is
    ever open."""
    run = Run()
    run(run.s.start())
    for step in steps:
        outs = (
            run.send(json.loads(step))
            if isinstance(step, str) and _is_obj(step)
            else (run(run.s.receive(step)) if isinstance(step, str) else run(_pipeline(run, step)))
        )
        starts = [o for o in outs if isinstance(o, R.StartResponse)]
        assert len(starts) <= 1
        if starts:
            assert run.s.response is not None and run.s.response.id == starts[0].response_id


def _is_obj(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def test_random_walk_over_real_ids() -> None:
    """Long seeded walks whose events name items that exist (truncate, delete, retrieve,
    previous_item_id), mixed with pipeline happenings: never an exception, every event
    SDK-valid, and the conversation and its heard records stay consistent."""
    for seed in range(6):
        rng = random.Random(seed)
        run = Run()
        run(run.s.start())
        t = 0
        for _ in range(400):
            conv = run.s.conversation
            some_id = rng.choice(conv.order) if conv.order and rng.random() < 0.9 else "zz"
            t += rng.randrange(0, 400)
            op = rng.randrange(14)
            if op == 0:
                run(run.s.speech_started(t))
            elif op == 1:
                run(run.s.speech_stopped(t))
            elif op == 2:
                run(run.s.output_text(rng.choice(["Hi. ", "How are you? ", "", "Fine. "])))
            elif op == 3:
                run(
                    run.s.output_audio(
                        pcm(rng.randrange(0, 600)), spoken_text=rng.choice([None, "Hi.", "Fine."])
                    )
                )
            elif op == 4:
                run(run.s.function_call("f", '{"a":1}'))
            elif op == 5:
                run(
                    run.s.response_finished(
                        incomplete_reason=rng.choice([None, "max_output_tokens"])
                    )
                )
            elif op == 6:
                run(run.s.transcript_done(some_id, "words"))
            elif op == 7:
                spoken = list(conv.spoken.items())
                target, ms = rng.choice(spoken) if spoken else (some_id, 0)
                if rng.random() < 0.2:
                    target = some_id
                run.send(
                    {
                        "type": "conversation.item.truncate",
                        "item_id": target,
                        "content_index": 0,
                        "audio_end_ms": rng.randrange(0, getattr(ms, "ms", 0) + 100),
                    }
                )
            elif op == 8:
                run.send({"type": "conversation.item.delete", "item_id": some_id})
            elif op == 9:
                run.send({"type": "conversation.item.retrieve", "item_id": some_id})
            elif op == 10:
                run.send({"type": "response.create"})
            elif op == 11:
                run.send({"type": "response.cancel"})
            elif op == 12:
                run.send(
                    {
                        "type": "conversation.item.create",
                        "previous_item_id": some_id,
                        "item": {
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": "x"}],
                        },
                    }
                )
            else:
                run.send(
                    {
                        "type": "input_audio_buffer.append",
                        "audio": base64.b64encode(pcm(rng.randrange(0, 300))).decode(),
                    }
                )
                run.send(
                    {"type": rng.choice(["input_audio_buffer.commit", "input_audio_buffer.clear"])}
                )
            conv = run.s.conversation
            assert len(conv.order) == len(set(conv.order)) == len(conv.items)
            assert set(conv.spoken) <= set(conv.items)
            for spoken in conv.spoken.values():  # more audio played never means fewer words
                a, b = sorted(rng.randrange(0, spoken.ms + 1) for _ in range(2))
                assert len(spoken.heard(a).split()) <= len(spoken.heard(b).split())
        assert {"response.done", "conversation.item.truncated", "error"} <= run.types
