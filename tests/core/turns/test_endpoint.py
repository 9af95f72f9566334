"""Endpointer: speech start, end of turn, minimum length, maximum length, hysteresis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.config import VadConfig
from voicepipe.core.turns.endpoint import EndpointConfig, Endpointer, SpeechEnded, SpeechStarted

MS = 1_000_000
CHUNK_NS = 32 * MS
CFG = EndpointConfig(
    threshold=0.5,
    neg_threshold=0.35,
    start_ms=64,
    min_speech_ms=200,
    end_silence_ms=400,
    max_utterance_ms=5000,
)


def run(
    probs: list[float], cfg: EndpointConfig = CFG, wall_offset: int = 7 * MS, flush: bool = False
) -> list:
    ep = Endpointer(cfg)
    events = []
    for k, p in enumerate(probs):
        start, end = k * CHUNK_NS, (k + 1) * CHUNK_NS
        events += ep.update(p, start, end, end + wall_offset)
    if flush:
        events += ep.flush(len(probs) * CHUNK_NS + wall_offset)
    return events


def test_start_needs_start_ms_of_speech_and_dates_onset_to_first_chunk():
    ev = run([0.0] * 5 + [0.9, 0.9, 0.9])
    assert len(ev) == 1 and isinstance(ev[0], SpeechStarted)
    assert ev[0].onset_media_ns == 5 * CHUNK_NS
    # decided when the second speech chunk (64 ms) arrived
    assert ev[0].now_ns == 7 * CHUNK_NS + 7 * MS
    assert ev[0].onset_wall_ns == 5 * CHUNK_NS + 7 * MS


def test_single_chunk_blip_does_not_start():
    assert run([0.0, 0.9, 0.0, 0.0, 0.9, 0.1] + [0.0] * 20) == []


def test_end_after_end_silence_with_last_speech_at_end_of_last_speech_chunk():
    probs = [0.0] * 3 + [0.9] * 20 + [0.0] * 30
    start, end = run(probs)
    assert isinstance(end, SpeechEnded) and end.reason == "silence" and end.accepted
    assert end.last_speech_media_ns == 23 * CHUNK_NS
    # 400 ms of silence = 12.5 chunks: decided at the end of the 13th silent chunk
    assert end.now_ns == (23 + 13) * CHUNK_NS + 7 * MS
    assert end.speech_ms == pytest.approx(20 * 32)


def test_short_pause_inside_speech_does_not_end_the_turn():
    probs = [0.9] * 10 + [0.0] * 10 + [0.9] * 10 + [0.0] * 20  # 320 ms pause < 400 ms
    ev = run(probs)
    assert [type(e) for e in ev] == [SpeechStarted, SpeechEnded]
    assert ev[1].last_speech_media_ns == 30 * CHUNK_NS


def test_turn_shorter_than_min_speech_is_not_accepted():
    probs = [0.9] * 4 + [0.0] * 20  # 128 ms of speech
    ev = run(probs)
    assert isinstance(ev[1], SpeechEnded) and not ev[1].accepted


def test_hysteresis_doubtful_chunks_keep_the_previous_class():
    # 0.4 is between neg_threshold and threshold: continues speech, continues silence.
    probs = [0.9] * 10 + [0.4] * 30 + [0.0] * 20
    ev = run(probs)
    assert ev[1].last_speech_media_ns == 40 * CHUNK_NS  # the 0.4s counted as speech
    probs = [0.9] * 10 + [0.0] * 5 + [0.4] * 20
    ev = run(probs)
    assert isinstance(ev[1], SpeechEnded)  # once silent, 0.4s do not revive the turn
    assert ev[1].last_speech_media_ns == 10 * CHUNK_NS
    assert run([0.4] * 20) == []  # and never start one


def test_max_length_cuts_and_a_new_turn_follows():
    probs = [0.9] * 300  # 9.6 s of continuous speech, max 5 s
    ev = run(probs)
    kinds = [type(e) for e in ev]
    assert kinds[:3] == [SpeechStarted, SpeechEnded, SpeechStarted]
    assert ev[1].reason == "max_length" and ev[1].accepted
    assert ev[1].last_speech_media_ns - ev[0].onset_media_ns >= 5000 * MS
    assert ev[2].onset_media_ns >= ev[1].last_speech_media_ns


def test_flush_closes_the_open_turn():
    ev = run([0.9] * 20, flush=True)
    assert [type(e) for e in ev] == [SpeechStarted, SpeechEnded]
    assert ev[1].reason == "flush"
    assert run([0.0] * 5, flush=True) == []


def test_decisions_depend_on_media_time_not_wall_time():
    probs = [0.0] * 3 + [0.9] * 12 + [0.0] * 14 + [0.8] * 9 + [0.0] * 20
    a = run(probs, wall_offset=0)
    b = run(probs, wall_offset=123 * MS)
    strip = [(type(e), e.onset_media_ns) for e in a]
    assert strip == [(type(e), e.onset_media_ns) for e in b]


def test_from_vad_config():
    cfg = EndpointConfig.from_vad(VadConfig())
    assert cfg.neg_threshold == pytest.approx(0.35)
    assert cfg.max_utterance_ms == 20_000 and cfg.end_silence_ms == 400
    with pytest.raises(ValueError):
        Endpointer(EndpointConfig(threshold=0.3, neg_threshold=0.5))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), max_size=400))
def test_events_alternate_and_are_ordered(probs):
    ev = run(probs, flush=True)
    for i, e in enumerate(ev):
        assert isinstance(e, SpeechStarted if i % 2 == 0 else SpeechEnded)
    assert len(ev) % 2 == 0
    for s, e in zip(ev[::2], ev[1::2], strict=True):
        assert s.onset_media_ns == e.onset_media_ns
        assert e.last_speech_media_ns >= s.onset_media_ns + CFG.start_ms * MS
        assert e.now_ns >= e.last_speech_wall_ns >= s.onset_wall_ns
        assert e.accepted == (e.speech_ms >= CFG.min_speech_ms)
    onsets = [e.onset_media_ns for e in ev[::2]]
    assert onsets == sorted(onsets)
