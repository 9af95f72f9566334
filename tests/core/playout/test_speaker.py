"""core/playout/speaker.py: the loudspeaker's output on the server's clock, the mic's clock."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe.core.playout.speaker import MicClock, Speaker

MS = 1_000_000
SR = 16000
FRAME = SR // 50  # 20 ms


def _send(sp: Speaker, turn: int, audio: np.ndarray, t0_ns: int, rate: int = SR) -> None:
    """Send ``audio`` as 20 ms frames planned back to back from ``t0_ns`` (same rate)."""
    n = rate // 50
    for i in range(0, len(audio), n):
        piece = audio[i : i + n]
        ref = piece if rate == SR else piece[:: rate // SR]
        sp.sent(turn, t0_ns + i * 1_000_000_000 // rate, len(piece), rate, ref)


def test_reference_is_the_audio_played_at_that_moment() -> None:
    sp = Speaker(SR)
    audio = np.arange(1, SR + 1, dtype=np.float32) / SR  # 1 s ramp, every sample distinct
    _send(sp, 1, audio, t0_ns=1000 * MS)
    # Before the client reports, frames play when planned.
    ref = sp.reference(1500 * MS, 160)
    np.testing.assert_array_equal(ref, audio[8000:8160])
    # The client reports the first sample played 70 ms later than planned.
    sp.first_play(1, 1070 * MS)
    assert sp.delay_ns == 70 * MS
    np.testing.assert_array_equal(sp.reference(1570 * MS, 160), audio[8000:8160])
    # Before the reply and after it: silence; straddling its start: zeros, then audio.
    assert not sp.reference(900 * MS, 160).any()
    assert not sp.reference(2100 * MS, 160).any()
    edge = sp.reference(1070 * MS - 5 * MS, 160)
    assert not edge[:80].any()
    np.testing.assert_array_equal(edge[80:], audio[:80])


def test_reference_maps_the_output_rate_to_the_reference_rate() -> None:
    sp = Speaker(SR)
    out = np.repeat(np.arange(1, 3 * SR + 1, dtype=np.float32), 3)[: 3 * SR]  # 48 kHz
    _send(sp, 1, out, t0_ns=0, rate=48000)
    # 16 kHz sample j is output sample 3j.
    np.testing.assert_array_equal(sp.reference(250 * MS, 16), out[12000:12048:3])


def test_a_held_reply_leaves_silence_and_resumes_where_it_stopped() -> None:
    sp = Speaker(SR)
    a = np.ones(SR // 5, np.float32)  # 200 ms before the hold
    b = np.full(SR // 5, 2.0, np.float32)  # 200 ms after it
    _send(sp, 1, a, t0_ns=0)
    _send(sp, 1, b, t0_ns=700 * MS)  # resumed 500 ms after the first part ended
    assert np.all(sp.reference(100 * MS, 160) == 1.0)
    assert not sp.reference(400 * MS, 160).any()  # the pause
    assert np.all(sp.reference(750 * MS, 160) == 2.0)


def test_a_cut_reply_stops_where_the_client_stopped_playing() -> None:
    sp = Speaker(SR)
    _send(sp, 1, np.ones(SR, np.float32), t0_ns=0)
    sp.done(1, played_samples=22050 // 4, sample_rate=22050)  # 250 ms played, then flushed
    assert np.all(sp.reference(200 * MS, 160) == 1.0)
    assert not sp.reference(300 * MS, 160).any()
    assert sp.active(200 * MS, 260 * MS) and not sp.active(260 * MS, 900 * MS)


def test_words_are_the_ones_played_in_the_span_not_the_whole_reply() -> None:
    sp = Speaker(SR)
    sp.chunk(1, "The capital of France is Paris.", 0)  # 6 words over the first 3 s
    sp.chunk(1, "It lies on the Seine.", 3 * SR)  # 5 words over the next 2 s
    _send(sp, 1, np.ones(5 * SR, np.float32), t0_ns=0)
    sp.finish(1)
    assert sp.words(0, 400 * MS) == ["the"]
    assert sp.words(2600 * MS, 3500 * MS) == ["paris", "it", "lies"]
    assert sp.words(4700 * MS, 9000 * MS) == ["seine"]
    assert "capital" not in sp.words(3000 * MS, 5000 * MS)
    # The client stopped at 1.1 s: the rest of the reply was never heard.
    sp.done(1, played_samples=round(1.1 * SR), sample_rate=SR)
    assert sp.words(0, 9000 * MS) == ["the", "capital", "of"]


def test_a_chunk_still_being_spoken_counts_from_its_start_on() -> None:
    sp = Speaker(SR)
    sp.chunk(1, "Once upon a time", 0)
    _send(sp, 1, np.ones(SR // 2, np.float32), t0_ns=0)
    assert sp.words(100 * MS, 200 * MS) == ["once", "upon", "a", "time"]
    assert sp.words(-900 * MS, -100 * MS) == []


def test_old_replies_are_forgotten() -> None:
    sp = Speaker(SR, keep_s=1.0)
    sp.chunk(1, "old words", 0)
    _send(sp, 1, np.ones(SR // 5, np.float32), t0_ns=0)
    sp.finish(1)
    sp.chunk(2, "new words", 0)
    _send(sp, 2, np.ones(SR // 5, np.float32), t0_ns=5000 * MS)
    assert sp.words(-10_000 * MS, 10_000 * MS) == ["new", "words"]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        Speaker(0)
    with pytest.raises(ValueError):
        Speaker(SR).sent(1, 0, 10, 0, np.zeros(3, np.float32))
    with pytest.raises(ValueError):
        MicClock(0)


def test_mic_clock_takes_the_least_delayed_arrival() -> None:
    mic = MicClock(window_s=1.0)
    assert mic.capture_ns(0) is None
    # Frames of 20 ms arrive 3 ms after capture, some up to 40 ms late (a stalled loop).
    late = [0, 40, 0, 25, 0, 0, 12]
    for i, extra in enumerate(late):
        end = (i + 1) * 20 * MS
        mic.arrived(end, 5000 * MS + end + (3 + extra) * MS)
    assert mic.capture_ns(100 * MS) == 5000 * MS + 103 * MS
    # The window lets a later offset take over once the old minimum is older than it.
    for i in range(7, 120):
        end = (i + 1) * 20 * MS
        mic.arrived(end, 5000 * MS + end + 9 * MS)
    assert mic.capture_ns(0) == 5000 * MS + 9 * MS


def test_progress_reports_follow_a_playout_that_fell_behind() -> None:
    sp = Speaker(SR)
    audio = np.arange(1, 2 * SR + 1, dtype=np.float32)
    _send(sp, 1, audio, t0_ns=0)
    sp.first_play(1, 30 * MS)
    # Half a second in, the client had played only 0.4 s: it ran dry for 70 ms.
    sp.progress(1, played_samples=round(0.4 * SR), sample_rate=SR, at_ns=500 * MS)
    assert sp.delay_ns == 100 * MS
    np.testing.assert_array_equal(sp.reference(600 * MS, 16), audio[8000:8016])
    # A small wobble does not move it (the canceller would have to re-adapt) …
    sp.progress(1, played_samples=round(0.5 * SR), sample_rate=SR, at_ns=602 * MS)
    assert sp.delay_ns == 100 * MS
    # … nor does a report of nothing new played (a held reply: the client is dry).
    sp.progress(1, played_samples=round(0.5 * SR), sample_rate=SR, at_ns=2000 * MS)
    assert sp.delay_ns == 100 * MS


def test_silent_from_is_when_the_last_audio_sent_plays_out() -> None:
    sp = Speaker(SR)
    assert sp.silent_from() == float("-inf")
    _send(sp, 1, np.ones(SR // 2, np.float32), t0_ns=1000 * MS)
    sp.first_play(1, 1100 * MS)
    assert sp.silent_from() == 1600 * MS
