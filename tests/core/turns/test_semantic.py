"""Semantic end of turn (core/turns/semantic.py): the pause a P(end) asks for, the board
that carries it to the endpointer, the books of the streaming prefill, and the endpointer
under a semantic policy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.core.turns.endpoint import EndpointConfig, Endpointer, SpeechEnded
from voicepipe.core.turns.semantic import (
    AheadLedger,
    EndOfTurnBoard,
    eagerness,
    p_end_read,
    silence_needed_ms,
    turn_over,
    unfinished_cue,
)

MS = 1_000_000


def test_eagerness_names_and_the_silence_fallback() -> None:
    assert eagerness("off") is None
    auto, medium = eagerness("auto"), eagerness("medium")
    assert auto == medium and auto is not None and auto.name == "medium"
    e = eagerness("medium", end_silence_ms=400)
    assert e is not None and e.unknown_ms == 400  # no estimate: the plain silence rule
    with pytest.raises(ValueError, match="eagerness"):
        eagerness("eager")


def test_a_finished_turn_ends_sooner_an_unfinished_one_later() -> None:
    e = eagerness("medium", 400)
    assert e is not None
    assert silence_needed_ms(0.9, e) == e.min_ms < 400
    assert silence_needed_ms(0.0005, e) == e.max_ms >= 1500
    assert silence_needed_ms(None, e) == 400
    # Monotone between the thresholds, strictly inside the range.
    ps = [e.p_lo * 1.01, 0.01, 0.05, 0.15, e.p_hi * 0.99]
    waits = [silence_needed_ms(p, e) for p in ps]
    assert all(a > b for a, b in zip(waits, waits[1:], strict=False))
    assert all(e.min_ms < w < e.max_ms for w in waits)
    assert turn_over(e.min_ms, 0.9, e) and not turn_over(e.min_ms, 0.01, e)
    assert turn_over(e.max_ms, 0.0005, e)


def test_eagerness_orders_the_waits() -> None:
    hi, med, lo = (eagerness(n, 400) for n in ("high", "medium", "low"))
    assert hi is not None and med is not None and lo is not None
    for p in (0.0005, 0.003, 0.01, 0.1, 0.4, 0.9):
        assert silence_needed_ms(p, hi) <= silence_needed_ms(p, med) <= silence_needed_ms(p, lo)


def test_the_board_answers_only_for_its_turn_and_speech_end() -> None:
    b = EndOfTurnBoard()
    assert b.p_end(1, 100) is None
    b.post(1, 100, 0.7, "Hi.")
    assert b.p_end(1, 100) == 0.7
    assert b.p_end(1, 132) is None  # the user spoke on: void
    assert b.p_end(2, 100) is None
    with pytest.raises(ValueError, match="probability"):
        b.post(1, 100, 1.5)


def test_the_ledger_counts_kept_rolled_back_and_passes() -> None:
    led = AheadLedger()
    conv = [1, 2, 3]  # the conversation and the user header, in the cache before the turn
    led.fed(conv + [10, 11], ran=2, passes=1, base=3)
    assert led.plan(conv + [10, 11, 12]) == 5
    led.fed(conv + [10, 11, 12, 13], ran=2, passes=1)
    # A revision: the last word re-tokenised differently rolls two tokens back.
    assert led.plan(conv + [10, 11, 14]) == 5
    led.fed(conv + [10, 11, 14], ran=1, passes=1)
    assert (led.prefilled, led.rolled_back, led.passes, led.texts) == (5, 2, 3, 3)
    kept, dropped = led.settle(conv + [10, 11, 15, 16])  # the final differs in its last token
    assert (kept, dropped) == (2, 1)
    assert led.settle(conv + [10, 11, 15, 16]) == (2, 0)  # nothing counted twice
    assert led.rolled_back == 3 and led.wasted_share == pytest.approx(3 / 5)
    led.reset()
    assert led.held is None and led.prefilled == led.rolled_back == 0
    assert led.settle([1]) == (0, 0)
    with pytest.raises(ValueError):
        led.fed([1], ran=-1, passes=0)


def _ep(name: str) -> Endpointer:
    return Endpointer(EndpointConfig(end_silence_ms=400, semantic=eagerness(name, 400)))


def test_endpointer_commits_sooner_on_a_finished_turn_and_waits_through_an_unfinished_one() -> None:
    assert _pause(_ep("off"), 3000, p_end_at=(0, 0.99)) == 416  # silence only
    assert _pause(_ep("medium"), 3000) == 416  # no estimate: as before
    soon = _pause(_ep("medium"), 9000, p_end_at=(0, 0.95))
    late = _pause(_ep("medium"), 9000, p_end_at=(0, 0.0005))
    assert soon is not None and late is not None
    assert 200 <= soon < 260 and late >= 1500
    eager = _pause(_ep("high"), 9000, p_end_at=(0, 0.0005))
    assert eager is not None and eager < late


def test_speech_after_the_estimate_voids_it() -> None:
    ep = _ep("medium")
    t = 0
    for _ in range(20):
        ep.update(0.9, t * MS, (t + 32) * MS, (t + 32) * MS)
        t += 32
    ep.set_p_end(0.99, ep.last_speech_media_ns)
    assert ep.p_end == 0.99
    ep.update(0.9, t * MS, (t + 32) * MS, (t + 32) * MS)  # the user speaks on
    assert ep.p_end is None
    assert ep.silence_needed_ns() == 400 * MS


def _pause(
    ep: Endpointer,
    silence_ms: int,
    *,
    expect_at: int | None = None,
    p_end_at: tuple[int, float] | None = None,
    decline_at: int | None = None,
) -> int | None:
    """640 ms of speech, then silence; at those silences (ms) an estimate is expected,
    known or declined. Returns the silence that ended the turn (None: not ended)."""
    t = 0
    for _ in range(20):
        ep.update(0.9, t * MS, (t + 32) * MS, (t + 32) * MS)
        t += 32
    last = ep.last_speech_media_ns
    for i in range(silence_ms // 32):
        s = i * 32
        if expect_at is not None and s >= expect_at:
            ep.expect_p_end(last)
        if p_end_at is not None and s >= p_end_at[0]:
            ep.set_p_end(p_end_at[1], last)
        if decline_at is not None and s >= decline_at:
            ep.decline_p_end(last)
        for ev in ep.update(0.0, t * MS, (t + 32) * MS, (t + 32) * MS):
            if isinstance(ev, SpeechEnded):
                return (t + 32) - ev.last_speech_media_ns // MS
        t += 32
    return None


def _up(ms: float) -> int:
    """The silence at the end of the 32 ms chunk that first reaches ``ms``."""
    return int(-(-ms // 32) * 32)


def test_a_pause_waits_for_an_estimate_on_its_way_instead_of_the_silence_rule() -> None:
    med = eagerness("medium", 400)
    assert med is not None
    # The pause's decode and the LLM took 900 ms: the silence rule would have cut at 416.
    assert _pause(_ep("medium"), 3000) == 416
    assert _pause(_ep("medium"), 9000, expect_at=64, p_end_at=(900, 0.0001)) == _up(med.max_ms)
    # A finished turn is committed as soon as its estimate is known past min_ms.
    assert _pause(_ep("medium"), 3000, expect_at=64, p_end_at=(480, 0.9)) == 512
    # Never longer than the longest wait, even if the estimate never comes.
    assert _pause(_ep("medium"), 9000, expect_at=64) == _up(med.max_ms)
    # Declined (no words decoded; the LLM busy with a reply): silence alone again.
    assert _pause(_ep("medium"), 3000, expect_at=64, decline_at=200) == 416
    # A decline is final for that speech end: a later expectation does not revive it.
    assert _pause(_ep("medium"), 3000, decline_at=64, expect_at=96) == 416
    # Silence only (eagerness off) never waits for an estimate.
    assert _pause(_ep("off"), 3000, expect_at=64) == 416


def test_speech_voids_the_expectation() -> None:
    ep = _ep("medium")
    t = 0
    for _ in range(20):
        ep.update(0.9, t * MS, (t + 32) * MS, (t + 32) * MS)
        t += 32
    ep.expect_p_end(ep.last_speech_media_ns)
    assert ep.awaiting_p_end
    ep.update(0.9, t * MS, (t + 32) * MS, (t + 32) * MS)  # the user speaks on
    assert not ep.awaiting_p_end and ep.silence_needed_ns() == 400 * MS


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(["high", "medium", "low"]),
    arrive=st.integers(64, 3000),
    p=st.floats(1e-6, 1.0),
)
def test_an_expected_estimate_never_cuts_sooner_than_its_own_wait(
    name: str, arrive: int, p: float
) -> None:
    """Waiting for the estimate can only end the turn at or after the pause the estimate
    itself asks for (or at the policy's longest wait if it comes later than that)."""
    e = eagerness(name, 400)
    assert e is not None
    ended = _pause(_ep(name), 10_000, expect_at=64, p_end_at=(arrive, p))
    assert ended is not None
    want = silence_needed_ms(p, e)
    if arrive < e.max_ms:
        assert ended >= min(want, e.max_ms)
        assert ended <= max(want, arrive) + 64
    else:
        assert ended == _up(e.max_ms)


@pytest.mark.parametrize(
    ("text", "cue"),
    [
        ("What is the capital of", "open word"),
        ("I'd like to book a table for", "open word"),
        ("Call my sister and", "open word"),
        ("Um...", "ellipsis"),
        ("I'd like, um", "filler"),
        ("2, 8, 1,", "comma"),
        ("How far is it from London to?", "open word"),  # Whisper's "?" on a cut clause
        ("What is the capital of France?", None),
        ("What time it is?", None),
        ("Turn the lights on.", None),
        ("Where are you from?", None),
        ("Set an alarm for 6.30.", None),
        ("The", None),  # one word: nothing to go on
        ("", None),
    ],
)
def test_unfinished_cues(text: str, cue: str | None) -> None:
    assert unfinished_cue(text) == cue


@given(p=st.floats(0.0, 1.0), text=st.text(max_size=40))
def test_a_cue_only_lowers_p_end_below_every_eagerness_threshold(p: float, text: str) -> None:
    got = p_end_read(p, text)
    assert got <= p
    if unfinished_cue(text) is None:
        assert got == p
    else:
        for name in ("high", "medium", "low"):
            e = eagerness(name, 400)
            assert e is not None and got <= e.p_lo


def test_the_board_tells_its_listeners_of_each_post_and_decline() -> None:
    b = EndOfTurnBoard()
    heard: list[tuple[float | None, bool]] = []
    b.listeners.append(lambda: heard.append((b.p_end(1, 100), b.declined(1, 100))))
    b.post(1, 100, 0.7)
    b.decline(1, 100)
    assert heard == [(0.7, False), (0.7, True)]


def test_a_board_with_a_source_takes_estimates_from_that_source_only() -> None:
    b = EndOfTurnBoard()
    heard: list[float | None] = []
    b.listeners.append(lambda: heard.append(b.p_end(1, 100)))
    b.source = "smollm2-135m"  # a separate P(end) model answers this session's pauses
    assert b.post(1, 100, 0.3, "What is the capital of France?", source="smollm2-135m")
    # the reply LLM's own reading of the same pause, later: refused, nothing changes
    assert not b.post(1, 100, 0.001, "What is the capital of France?", source="qwen")
    assert not b.post(1, 100, 0.001, "What is the capital of France?")  # unnamed: refused
    assert not b.decline(1, 100, source="qwen")  # nor may another source void it
    assert b.p_end(1, 100) == 0.3 and not b.declined(1, 100)
    assert b.latest is not None and b.latest.source == "smollm2-135m"
    assert (b.posted, b.refused, heard) == (1, 3, [0.3])  # listeners woken for the post only
    assert b.decline(1, 132, source="smollm2-135m") and b.declined(1, 132)


def test_a_board_without_a_source_takes_any_post() -> None:
    b = EndOfTurnBoard()
    assert b.post(1, 100, 0.3, source="a") and b.post(1, 100, 0.2, source="b")
    assert b.p_end(1, 100) == 0.2 and b.refused == 0
    assert b.latest is not None and b.latest.source == "b"


def _silent_for(ep: Endpointer, silence_ms: int) -> int:
    """640 ms of speech then ``silence_ms`` of silence (whole chunks); the media end (ms)."""
    t = 0
    for _ in range(20):
        ep.update(0.9, t * MS, (t + 32) * MS, (t + 32) * MS)
        t += 32
    for _ in range(silence_ms // 32):
        ep.update(0.0, t * MS, (t + 32) * MS, (t + 32) * MS)
        t += 32
    return t


def test_an_estimate_between_chunks_ends_the_turn_at_once_when_the_silence_is_enough() -> None:
    ep = _ep("medium")
    ep.expect_p_end(640 * MS)  # an estimate is on its way: the pause waits (max_ms)
    end = _silent_for(ep, 480)
    assert ep.in_speech
    last = ep.last_speech_media_ns
    assert ep.poll(end * MS + 5 * MS) == []  # nothing new: still waiting
    ep.set_p_end(0.95, last)  # a finished question: 200 ms would do, 480 are heard
    (ev,) = ep.poll(end * MS + 7 * MS)
    assert isinstance(ev, SpeechEnded) and ev.reason == "silence" and ev.accepted
    assert ev.now_ns == end * MS + 7 * MS and ev.last_speech_media_ns == last
    assert not ep.in_speech and ep.poll(end * MS + 9 * MS) == []


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(["high", "medium", "low"]),
    silence=st.integers(0, 60).map(lambda k: 32 * k),
    p=st.floats(1e-6, 1.0),
)
def test_poll_ends_a_turn_exactly_when_the_next_chunks_rule_would_have(
    name: str, silence: int, p: float
) -> None:
    """``poll`` is the chunk's own rule applied between chunks: it ends the turn iff the
    silence heard so far is what the estimate asks for, never sooner."""
    e = eagerness(name, 400)
    assert e is not None
    ep = _ep(name)
    _silent_for(ep, silence)
    if not ep.in_speech:  # (the plain rule ended it before any estimate: nothing to poll)
        return
    ep.set_p_end(p, ep.last_speech_media_ns)
    ended = bool(ep.poll(1))
    assert ended == (silence >= silence_needed_ms(p, e))
