"""TTS stage with the real hibari backend: audio per chunk, tts.ttfa span, ReplyEnd, interrupt."""

from __future__ import annotations

import numpy as np
import pytest

from tests.stages._frames import sink as _sink
from tests.stages._frames import wait_for as _wait_for
from voicepipe import config
from voicepipe.frames import (
    ErrorFrame,
    Frame,
    InputEnd,
    Interrupt,
    PlaybackReport,
    ReplyAudio,
    ReplyEnd,
    ReplyHeard,
    SpanFrame,
    TextChunk,
)
from voicepipe.pipeline import Pipeline
from voicepipe.stages.tts import HibariBackend, TTSStage, trim_edges


@pytest.fixture(scope="module")
def backend() -> HibariBackend:
    return HibariBackend()


async def test_text_chunks_become_audio_span_and_reply_end(backend: HibariBackend) -> None:
    out: list[Frame] = []
    p = Pipeline([TTSStage(config.Config(), backend)], _sink(out))
    await p.start()
    await p.put(TextChunk(turn_id=1, text="Sure! The capital of France is Paris."))
    await p.put(TextChunk(turn_id=1, text="It is lovely in spring.", last=True))
    await p.put(InputEnd(turn_id=2))
    await _wait_for(out, InputEnd)
    await p.stop()
    audio = [f for f in out if isinstance(f, ReplyAudio)]
    spans = [f for f in out if isinstance(f, SpanFrame) and f.name == "tts.ttfa"]
    ends = [f for f in out if isinstance(f, ReplyEnd)]
    assert len(audio) >= 2 and all(a.sample_rate == 22050 and a.turn_id == 1 for a in audio)
    total = sum(len(a.pcm) for a in audio) / 22050
    assert 2.0 < total < 8.0
    assert len(spans) == 2 and spans[0].end_ns > spans[0].start_ns
    assert len(ends) == 1 and "Paris" in ends[0].text and "spring" in ends[0].text
    assert out.index(ends[0]) > out.index(audio[-1])
    assert all(np.isfinite(a.pcm).all() for a in audio)


async def test_interrupt_stops_old_turn_at_once(backend: HibariBackend) -> None:
    out: list[Frame] = []
    stage = TTSStage(config.Config(), backend)
    p = Pipeline([stage], _sink(out))
    await p.start()
    long = " ".join(f"This is sentence number {i} of a long reply." for i in range(12))
    await p.put(TextChunk(turn_id=1, text=long, last=True))
    await _wait_for(out, ReplyAudio)
    await p.put(Interrupt(turn_id=2))
    await p.put(TextChunk(turn_id=2, text="Okay.", last=True))
    await p.put(InputEnd(turn_id=2))
    await _wait_for(out, InputEnd)
    await p.stop()
    i_int = next(i for i, f in enumerate(out) if isinstance(f, Interrupt))
    after = [f for f in out[i_int:] if isinstance(f, ReplyAudio | ReplyEnd)]
    assert all(f.turn_id == 2 for f in after)  # nothing of turn 1 after the interrupt
    assert any(isinstance(f, ReplyAudio) and f.turn_id == 2 for f in after)
    old = sum(len(f.pcm) for f in out if isinstance(f, ReplyAudio) and f.turn_id == 1)
    assert old < 12 * 22050  # turn 1 was cut short


async def test_codec_lm_backend_streams_several_chunks() -> None:
    from voicepipe.stages.tts import CodecLMBackend

    out: list[Frame] = []
    p = Pipeline([TTSStage(config.Config(), CodecLMBackend(config.Config()))], _sink(out))
    await p.start()
    await p.put(TextChunk(turn_id=3, text="The store opens at nine.", last=True))
    await p.put(InputEnd(turn_id=3))
    await _wait_for(out, InputEnd)
    await p.stop()
    audio = [f for f in out if isinstance(f, ReplyAudio)]
    assert len(audio) >= 2  # streamed in codec-frame chunks, not one block
    span = next(f for f in out if isinstance(f, SpanFrame) and f.name == "tts.ttfa")
    assert span.attrs["backend"] == "codec-lm"
    assert out.index(span) < out.index(audio[0])
    assert 0.8 < sum(len(a.pcm) for a in audio) / 22050 < 3.5


async def test_cut_reply_sends_the_heard_words_upstream(backend: HibariBackend) -> None:
    """A final playback report that stops inside the second chunk: the LLM is told the first
    chunk plus the second chunk's words whose audio was played, nothing more."""
    out: list[Frame] = []
    upstream: list[Frame] = []
    stage = TTSStage(config.Config(), backend)
    p = Pipeline([stage], _sink(out), upstream_sink=_sink(upstream))
    await p.start()
    first, second = "Sure, the capital of France is Paris.", "It sits on the river Seine today."
    await p.put(TextChunk(turn_id=1, text=first))
    await p.put(TextChunk(turn_id=1, text=second, last=True))
    await _wait_for(out, ReplyEnd)
    audio = [f for f in out if isinstance(f, ReplyAudio)]
    n1 = stage._spoken[1].chunks[0][1] * 22050  # samples of the first chunk
    n2 = sum(len(a.pcm) for a in audio) - n1
    # Played: the whole first chunk and a bit over half of the second (7 words → 4).
    played = int(n1 + n2 * 4.2 / 7)
    await p.put(
        PlaybackReport(turn_id=1, reply_turn=1, played_samples=played, sample_rate=22050, done=True)
    )
    await _wait_for(upstream, ReplyHeard, timeout_s=5)
    await p.stop()
    (heard,) = [f for f in upstream if isinstance(f, ReplyHeard)]
    assert heard.turn_id == 1
    assert heard.text == first + " It sits on the"


async def test_played_to_the_end_sends_nothing_upstream(backend: HibariBackend) -> None:
    out: list[Frame] = []
    upstream: list[Frame] = []
    p = Pipeline([TTSStage(config.Config(), backend)], _sink(out), upstream_sink=_sink(upstream))
    await p.start()
    await p.put(TextChunk(turn_id=1, text="All done.", last=True))
    await _wait_for(out, ReplyEnd)
    total = sum(len(f.pcm) for f in out if isinstance(f, ReplyAudio))
    await p.put(
        PlaybackReport(turn_id=1, reply_turn=1, played_samples=total, sample_rate=22050, done=True)
    )
    await p.put(InputEnd(turn_id=1))
    await _wait_for(out, InputEnd)
    await p.stop()
    assert not any(isinstance(f, ReplyHeard) for f in upstream)


class _Flaky:
    """A backend that fails on one text and speaks the others (fault injection)."""

    name = "flaky"
    sample_rate = 22050

    def stream(self, text: str):
        if "boom" in text:
            raise ValueError("cannot phonemize")
        yield np.full(2205, 0.1, np.float32)  # audible: the stage sends it all


async def test_a_failing_chunk_is_skipped_not_fatal() -> None:
    out: list[Frame] = []
    p = Pipeline([TTSStage(config.Config(), _Flaky())], _sink(out))
    await p.start()
    await p.put(TextChunk(turn_id=1, text="boom 10000000000000000000"))
    await p.put(TextChunk(turn_id=1, text="Still here.", last=True))
    await p.put(InputEnd(turn_id=1))
    await _wait_for(out, InputEnd, timeout_s=10)
    await p.stop()
    errors = [f for f in out if isinstance(f, ErrorFrame)]
    assert len(errors) == 1 and not errors[0].fatal and errors[0].code == "tts_error"
    assert p.error is None
    assert sum(isinstance(f, ReplyAudio) for f in out) == 1
    assert any(isinstance(f, ReplyEnd) for f in out)


class _Heard:
    """Wraps the real hibari engine and notes the text it was asked to speak."""

    def __init__(self, tts) -> None:
        self.tts, self.texts = tts, []

    def stream(self, text: str, **kw):
        self.texts.append(text)
        return self.tts.stream(text, **kw)


async def test_backends_speak_normalised_text_and_heard_keeps_the_original(
    backend: HibariBackend,
) -> None:
    """hibari is given words ("First, ...", "nineteen sixty-nine"); ReplyEnd and the text
    kept after a barge-in are the LLM's own characters, cut at a spoken-word boundary."""
    spy = _Heard(backend.tts)
    backend.tts = spy
    try:
        out: list[Frame] = []
        upstream: list[Frame] = []
        stage = TTSStage(config.Config(), backend)
        p = Pipeline([stage], _sink(out), upstream_sink=_sink(upstream))
        await p.start()
        first, second = '1. Read "Romeo and Juliet" today.', "It opened in 1597 for $3.50 😀"
        await p.put(TextChunk(turn_id=1, text=first))
        await p.put(TextChunk(turn_id=1, text=second, last=True))
        await _wait_for(out, ReplyEnd)
        assert spy.texts == [
            "First, Read Romeo and Juliet today.",
            "It opened in fifteen ninety-seven for three dollars and fifty cents",
        ]
        (end,) = [f for f in out if isinstance(f, ReplyEnd)]
        assert end.text == f"{first} {second}"
        n1 = stage._spoken[1].chunks[0][1] * 22050
        n2 = sum(len(f.pcm) for f in out if isinstance(f, ReplyAudio)) - n1
        # 12 spoken words in the second chunk; played: "It opened in fifteen ninety-seven"
        # and a bit: "1597" (3 spoken words) counts, "for" does not.
        played = int(n1 + n2 * 6.3 / 12)
        await p.put(
            PlaybackReport(
                turn_id=1, reply_turn=1, played_samples=played, sample_rate=22050, done=True
            )
        )
        await _wait_for(upstream, ReplyHeard, timeout_s=5)
        await p.stop()
    finally:
        backend.tts = spy.tts
    (heard,) = [f for f in upstream if isinstance(f, ReplyHeard)]
    assert heard.text == f"{first} It opened in 1597"


async def test_normalize_off_speaks_the_raw_text(backend: HibariBackend) -> None:
    spy = _Heard(backend.tts)
    backend.tts, backend.normalize = spy, False
    try:
        list(backend.stream("Dr. Smith, 2 + 2."))
    finally:
        backend.tts, backend.normalize = spy.tts, True
    assert spy.texts == ["Dr. Smith, 2 + 2."]
    assert config.Config().tts.normalize is True


def test_normalised_llm_text_is_heard_as_written(backend: HibariBackend) -> None:
    """Round trip through Whisper: with the front-end, hibari's reading of list markers,
    quoted titles, units and URLs is transcribed as the text meant (scored after the
    front-end on both sides, so "1969" equals "nineteen sixty-nine"); raw, it is not."""
    from voicepipe.bench.textnorm import _speak
    from voicepipe.core.text.norm import normalize
    from voicepipe.core.text.wer import wer
    from voicepipe.roundtrip import transcribe

    texts = [
        '1. Read "Romeo and Juliet" by Shakespeare first.',
        "**Tip:** drink 2 L of water a day 😀",
        "Visit https://www.example.com/help for more info.",
    ]
    refs = [normalize(t) for t in texts]
    scores = {}
    for norm in (False, True):
        backend.normalize = norm
        hyps = [normalize(transcribe(_speak(backend, t), backend.sample_rate)) for t in texts]
        scores[norm] = wer(refs, hyps)
    backend.normalize = True
    assert scores[True] <= 0.1 < scores[False]


async def test_a_chunk_is_sent_from_just_before_its_first_audible_sample(
    backend: HibariBackend,
) -> None:
    """The voice's own leading silence (hibari: 300-375 ms) is not sent; lead_in_ms -1
    sends it, so both the trim and what it trims are real."""

    async def first_audio(lead_in_ms: int) -> np.ndarray:
        out: list[Frame] = []
        cfg = config.load(None, [f"tts.lead_in_ms={lead_in_ms}"])
        p = Pipeline([TTSStage(cfg, backend)], _sink(out))
        await p.start()
        await p.put(TextChunk(turn_id=1, text="The capital of France is Paris.", last=True))
        await _wait_for(out, ReplyEnd)
        await p.stop()
        return np.concatenate([f.pcm for f in out if isinstance(f, ReplyAudio)])

    def lead_ms(x: np.ndarray) -> float:
        return float(np.flatnonzero(np.abs(x) > 0.01)[0]) * 1000 / 22050

    trimmed, whole = await first_audio(40), await first_audio(-1)
    assert lead_ms(whole) > 200 and 20 < lead_ms(trimmed) < 60
    np.testing.assert_array_equal(trimmed, whole[len(whole) - len(trimmed) :])


async def test_a_chunk_ends_a_pause_after_its_last_audible_sample(backend: HibariBackend) -> None:
    """The voice's own trailing silence is cut to tail_ms after a sentence and to
    tail_clause_ms after a chunk that ends mid-sentence; -1 sends it all, so both the cut
    and what it cuts are real."""

    async def audio(text: str, tail_ms: int, lead_in_ms: int = 40) -> np.ndarray:
        out: list[Frame] = []
        overrides = [f"tts.tail_ms={tail_ms}", f"tts.tail_clause_ms={tail_ms // 3}"]
        cfg = config.load(None, [*overrides, f"tts.lead_in_ms={lead_in_ms}"])
        p = Pipeline([TTSStage(cfg, backend)], _sink(out))
        await p.start()
        await p.put(TextChunk(turn_id=1, text=text, last=True))
        await _wait_for(out, ReplyEnd)
        await p.stop()
        return np.concatenate([f.pcm for f in out if isinstance(f, ReplyAudio)])

    def tail_ms(x: np.ndarray) -> float:
        return (len(x) - 1 - float(np.flatnonzero(np.abs(x) > 0.01)[-1])) * 1000 / 22050

    sentence = "The capital of France is Paris."
    whole, cut = await audio(sentence, -1), await audio(sentence, 300)
    assert tail_ms(whole) > 350 and 290 < tail_ms(cut) <= 301
    np.testing.assert_array_equal(cut, whole[: len(cut)])
    clause = await audio("The moon is approximately", 300)
    assert 90 < tail_ms(clause) <= 101  # tail_clause_ms
    # what benches apply to audio synthesized offline is what the stage sends
    raw = await audio(sentence, -1, lead_in_ms=-1)
    cfg = config.load(None, ["tts.tail_ms=300"])
    np.testing.assert_array_equal(trim_edges(raw, sentence, cfg.tts, backend.sample_rate), cut)
