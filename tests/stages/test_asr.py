"""AsrStage on real spoken clips (hibari teacher voice) with the real Whisper tiny.en.

The clips and their reference texts are committed under tests/data/asr/
(regenerate with tests/data/asr/make_clips.py). Most checks share one
lockstep pass over every clip (decoding as if it took no time, so partials
fall at the same audio positions on every run); one test runs a clip through
a real Pipeline with decoding overlapping intake.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from voicepipe import config, pipelines
from voicepipe.audio import read_wav, resample
from voicepipe.core.text.wer import wer
from voicepipe.core.turns.partials import unstable_words, word_key
from voicepipe.core.turns.preempt import agrees
from voicepipe.frames import (
    AudioIn,
    Frame,
    InputEnd,
    Interrupt,
    SpanFrame,
    SpeechEnd,
    SpeechResumed,
    SpeechStart,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptStable,
)
from voicepipe.pipeline import Pipeline
from voicepipe.stages.asr import AsrStage, stream_file

DATA = Path(__file__).resolve().parent.parent / "data" / "asr"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
CFG = config.load()
NOISY_TEXT = next(c["finals"][0] for c in MANIFEST["clips"] if c["kind"] == "noisy")


@pytest.fixture(scope="module")
def asr():
    from voicepipe.nn.asr.whisper import WhisperAsr

    model = WhisperAsr.from_config(CFG)
    model.warmup()
    return model


async def run_clip(asr, name: str, cfg=CFG, **kw) -> tuple[list[Frame], AsrStage]:
    stage = AsrStage(cfg, asr=asr)
    await stage.start()
    try:
        pcm, sr = read_wav(DATA / name)
        out = await stream_file(stage, pcm, sr, **kw)
    finally:
        await stage.stop()
    return out, stage


@pytest.fixture(scope="module")
def results(asr):
    async def all_clips():
        return {c["file"]: (await run_clip(asr, c["file"]))[0] for c in MANIFEST["clips"]}

    return asyncio.run(all_clips())


def finals(out: list[Frame]) -> list[TranscriptFinal]:
    return [f for f in out if isinstance(f, TranscriptFinal)]


async def feed_lockstep(stage: AsrStage, pcm: np.ndarray, sr: int) -> None:
    """``pcm`` into ``stage`` in 20 ms frames, each frame's decodes done before the next
    (decoding as if it took no time: an estimate posted from a TranscriptStable is
    there when the next audio comes, as the pause's decode and the LLM allow)."""
    n = sr // 50
    for seq, i in enumerate(range(0, len(pcm), n)):
        await stage.process(
            AudioIn(pcm=pcm[i : i + n], sample_rate=sr, media_ns=i * 10**9 // sr, seq=seq)
        )
        await stage.wait_idle()


def test_manifest_covers_what_the_issue_asks_for():
    kinds = [c["kind"] for c in MANIFEST["clips"]]
    assert kinds.count("utterance") >= 12
    assert {"stream", "noisy", "silence", "noise"} <= set(kinds)
    texts = [t for c in MANIFEST["clips"] for t in c["finals"]]
    assert any("?" in t for t in texts)
    for c in MANIFEST["clips"]:
        pcm, sr = read_wav(DATA / c["file"])
        assert sr == 16000
        if c["kind"] == "utterance":
            assert 1.0 <= len(pcm) / sr - 1.3 <= 8.0  # speech length without the padding


def test_wer_over_the_set_is_at_most_10_percent(results):
    refs, hyps = [], []
    for c in MANIFEST["clips"]:
        if c["finals"]:
            refs.append(" ".join(c["finals"]))
            hyps.append(" ".join(f.text for f in finals(results[c["file"]])))
    assert wer(refs, hyps) <= 0.10, list(zip(refs, hyps, strict=True))


def test_two_utterances_with_a_pause_give_two_finals_in_two_turns(results):
    out = results["stream2.wav"]
    fs = finals(out)
    expected = next(c for c in MANIFEST["clips"] if c["file"] == "stream2.wav")["finals"]
    assert len(fs) == 2, [f.text for f in fs]
    for f, ref in zip(fs, expected, strict=True):
        assert wer(ref, f.text) <= 0.2, (ref, f.text)
    assert fs[0].turn_id == 1 and fs[1].turn_id == 2
    assert fs[0].speech_end_media_ns < fs[1].speech_end_media_ns
    # Each turn: SpeechStart, then its partials (and the stable text of each pause, voided
    # by SpeechResumed when the user went on), then SpeechEnd, then the final.
    for turn in (1, 2):
        kinds = [type(f) for f in out if f.turn_id == turn and not isinstance(f, SpanFrame)]
        assert kinds[0] is SpeechStart and kinds[-2:] == [SpeechEnd, TranscriptFinal]
        assert set(kinds[1:-2]) <= {TranscriptPartial, TranscriptStable, SpeechResumed}
        assert TranscriptStable in kinds  # the endpoint pause's, at least
        for i, k in enumerate(kinds):
            if k is SpeechResumed:  # voids the pause's stable text sent just before
                assert TranscriptStable in kinds[:i]


@pytest.mark.parametrize("name", ["silence.wav", "noise.wav"])
def test_silence_and_noise_give_no_transcript(results, name):
    out = results[name]
    assert finals(out) == []
    assert [f for f in out if isinstance(f, TranscriptPartial)] == []
    if name == "silence.wav":
        assert not any(isinstance(f, SpeechStart) for f in out)


def test_partials_do_not_flicker_beyond_the_last_word_or_two(results):
    count = 0
    for c in MANIFEST["clips"]:
        out = results[c["file"]]
        by_turn = {f.turn_id: f.text for f in finals(out)}
        stable_before: dict[int, str] = {}
        for p in (f for f in out if isinstance(f, TranscriptPartial)):
            count += 1
            final = by_turn[p.turn_id]
            assert unstable_words(p.text, final) <= 2, (p.text, final)
            assert unstable_words(p.stable_prefix, final) <= 1, (p.stable_prefix, final)
            # Committed words are never taken back: the shown text keeps them as first
            # shown; stable_prefix (what the LLM prefills) keeps the words in the newest
            # decode's spelling ("platform" → "Platform").
            prev = stable_before.get(p.turn_id, "")
            stable = [word_key(w) for w in p.stable_prefix.split()]
            assert p.text.startswith(prev)
            assert [word_key(w) for w in p.text.split()][: len(stable)] == stable
            stable_before[p.turn_id] = " ".join(p.text.split()[: len(stable)])
    assert count >= len(MANIFEST["clips"])  # partials did happen (~5 per utterance)


def test_spans_per_turn(results):
    out = results["stream2.wav"]
    spans = [f for f in out if isinstance(f, SpanFrame)]
    for turn in (1, 2):
        vad = [s for s in spans if s.turn_id == turn and s.name == "vad.speech"]
        fin = [s for s in spans if s.turn_id == turn and s.name == "asr.final"]
        assert len(vad) == 1 and len(fin) == 1
        assert vad[0].end_ns >= vad[0].start_ns and fin[0].end_ns >= fin[0].start_ns
        assert fin[0].start_ns >= vad[0].end_ns  # the endpoint comes after the last speech
        assert vad[0].attrs["media_end_ms"] > vad[0].attrs["media_start_ms"]
        assert fin[0].attrs["text"] == finals(out)[turn - 1].text


async def test_pipeline_with_overlapping_decoding_and_an_interrupt(asr):
    """Real Pipeline, no lockstep; an Interrupt between the utterances must not lose audio."""
    stage = AsrStage(CFG, asr=asr)
    out: list[Frame] = []
    done = asyncio.Event()

    async def sink(f: Frame) -> None:
        out.append(f)
        if isinstance(f, InputEnd):
            done.set()

    pipe = Pipeline([stage], sink)
    await pipe.start()
    pcm, sr = read_wav(DATA / "stream2.wav")
    n = sr // 50
    for seq, i in enumerate(range(0, len(pcm), n)):
        if i == 4 * sr:  # in the pause between the two utterances
            await pipe.interrupt(5, "test")
        await pipe.put(
            AudioIn(pcm=pcm[i : i + n], sample_rate=sr, seq=seq, media_ns=i * 1_000_000_000 // sr)
        )
    await pipe.put(InputEnd())
    await asyncio.wait_for(done.wait(), 60)
    await pipe.stop()
    fs = finals(out)
    assert len(fs) == 2
    assert fs[0].turn_id == 1 and fs[1].turn_id > 5  # turns born after an interrupt are newer
    assert any(isinstance(f, Interrupt) for f in out)  # passed on downstream


async def test_other_input_rates_are_resampled(asr):
    pcm, sr = read_wav(DATA / "utt11.wav")
    pcm48 = resample(pcm, sr, 48000)
    stage = AsrStage(CFG, asr=asr)
    await stage.start()
    out = await stream_file(stage, pcm48, 48000, lockstep=False)
    await stage.stop()
    (f,) = finals(out)
    assert wer("Why is the sky blue?", f.text) == 0.0


def test_asr_pipeline_builds():
    info = pipelines.SessionInfo.for_config(CFG)
    stages = pipelines.build("asr", CFG, info)
    assert isinstance(stages[0], AsrStage)
    assert np.all([s.name for s in stages])


async def test_max_utterance_length_cuts_into_turns_without_losing_or_doubling_words(asr):
    import dataclasses

    cfg = dataclasses.replace(CFG, vad=dataclasses.replace(CFG.vad, max_utterance_s=2.0))
    stage = AsrStage(cfg, asr=asr)
    await stage.start()
    pcm, sr = read_wav(DATA / "utt13.wav")  # ~4.4 s of continuous speech
    out = await stream_file(stage, pcm, sr)
    await stage.stop()
    fs = finals(out)
    assert len(fs) >= 2
    assert [f.turn_id for f in fs] == sorted({f.turn_id for f in fs})
    ref = "Tell me a short story about a brave little robot who learns to swim."
    # Cuts fall mid-word, so allow the word at each seam to be lost or garbled.
    assert wer(ref, " ".join(f.text for f in fs)) <= 0.2, [f.text for f in fs]


# ---------------------------------------------------------------- preemption (turns.preempt)


def test_stable_text_comes_in_the_endpoint_silence_and_agrees_with_the_final(results):
    turns = agreed = 0
    for c in MANIFEST["clips"]:
        out = results[c["file"]]
        for fin in finals(out):
            turns += 1
            mine = [f for f in out if f.turn_id == fin.turn_id]
            kinds = [type(f) for f in mine]
            assert TranscriptStable in kinds, c["file"]  # every turn ended in a pause
            last = max(i for i, k in enumerate(kinds) if k is TranscriptStable)
            assert last < kinds.index(SpeechEnd)  # before the endpoint fired
            stable = mine[last]
            assert stable.speech_end_media_ns == fin.speech_end_media_ns
            agreed += agrees(stable.text, fin.text)
    # The stable text is the early final itself: with no speech after it, the same decode.
    assert turns >= 14 and agreed == turns


def _trim(pcm: np.ndarray, sr: int) -> np.ndarray:
    """Cut the clip's silent padding (20 ms frames quieter than -40 dBFS)."""
    n = sr // 50
    loud = [i for i in range(0, len(pcm) - n, n) if np.sqrt(np.mean(pcm[i : i + n] ** 2)) > 0.01]
    return pcm[loud[0] : loud[-1] + n]


async def test_speech_after_the_stable_text_voids_it(asr):
    # "Hello." + a 250 ms pause (longer than turns.preempt_after_ms, shorter than the endpoint
    # silence) + "Why is the sky blue?": one turn, whose first stable text is withdrawn.
    a, sr = read_wav(DATA / "utt12.wav")
    b, _ = read_wav(DATA / "utt11.wav")
    pad = np.zeros(sr // 2, np.float32)
    pcm = np.concatenate([pad, _trim(a, sr), np.zeros(sr // 4, np.float32), _trim(b, sr), pad, pad])
    stage = AsrStage(CFG, asr=asr)
    await stage.start()
    try:
        out = await stream_file(stage, pcm, sr)
    finally:
        await stage.stop()
    (fin,) = finals(out)
    assert wer("Hello. Why is the sky blue?", fin.text) <= 0.2, fin.text
    seq = [f for f in out if isinstance(f, TranscriptStable | SpeechResumed | SpeechEnd)]
    kinds = [type(f) for f in seq]
    i = kinds.index(SpeechResumed)
    assert kinds[:i] == [TranscriptStable] and "hello" in seq[0].text.lower()
    assert kinds[i + 1 :] == [TranscriptStable, SpeechEnd]
    assert agrees(seq[i + 1].text, fin.text)
    assert stage.stats["resumed"] == 1


async def test_no_stable_text_when_preemption_is_off(asr):
    import dataclasses

    cfg = dataclasses.replace(CFG, turns=dataclasses.replace(CFG.turns, preempt=False))
    out, stage = await run_clip(asr, "utt11.wav", cfg)
    assert len(finals(out)) == 1
    assert not any(isinstance(f, TranscriptStable | SpeechResumed) for f in out)


async def test_preempting_before_the_early_final_costs_one_more_decode(asr):
    import dataclasses

    cfg = dataclasses.replace(
        CFG,
        asr=dataclasses.replace(CFG.asr, early_final_ms=160),
        turns=dataclasses.replace(CFG.turns, preempt_after_ms=80),
    )
    out, stage = await run_clip(asr, "utt11.wav", cfg)
    (fin,) = finals(out)
    stables = [f for f in out if isinstance(f, TranscriptStable)]
    # One stable text after 80 ms of silence, another from the early final's decode at 160 ms.
    assert len(stables) == 2 and stage.stats["stable_s"] > 0
    assert all(agrees(s.text, fin.text) for s in stables)
    assert stage.stats["early_hits"] == 1  # the final still comes from the 160 ms decode


@pytest.mark.parametrize(("preempt_ms", "stables"), [(300, 1), (10_000, 0)])
async def test_an_early_final_before_the_preempt_pause_waits_for_it(asr, preempt_ms, stables):
    # asr.early_final_ms below turns.preempt_after_ms: the pause is decoded at 64 ms and
    # that very text goes out as the stable one once the silence reaches preempt_after_ms
    # (no second decode), never before: past the endpoint silence (10 s), not at all.
    import dataclasses

    cfg = dataclasses.replace(
        CFG,
        asr=dataclasses.replace(CFG.asr, early_final_ms=64),
        turns=dataclasses.replace(CFG.turns, preempt_after_ms=preempt_ms),
    )
    out, stage = await run_clip(asr, "utt11.wav", cfg)
    (fin,) = finals(out)
    got = [f for f in out if isinstance(f, TranscriptStable)]
    assert len(got) == stables and stage.stats["stables"] == stables
    assert all(s.text == fin.text for s in got)  # the same decode: the final is the early one
    assert stage.stats["stable_s"] == 0 and stage.stats["early_hits"] == 1


async def test_a_late_final_decode_does_not_see_the_endpoint_silence(asr):
    """Without lockstep the decoder falls behind, so the final is decoded after the whole
    endpoint silence has arrived; it still sees only asr.tail_ms past the last speech chunk
    (the noisy clip: its trailing noise is what Whisper would turn into words)."""
    pcm, sr = read_wav(DATA / "noisy.wav")
    trailing = np.concatenate([pcm, pcm[-sr // 2 :], pcm[-sr // 2 :]])  # a long noisy tail
    stage = AsrStage(CFG, asr=asr)
    await stage.start()
    out = await stream_file(stage, trailing, sr, lockstep=False)
    await stage.stop()
    (span,) = [f for f in out if isinstance(f, SpanFrame) and f.name == "asr.final"]
    (vad,) = [f for f in out if isinstance(f, SpanFrame) and f.name == "vad.speech"]
    speech_s = (vad.attrs["media_end_ms"] - vad.attrs["media_start_ms"]) / 1e3
    preroll_s = 0.3
    assert span.attrs["audio_s"] <= speech_s + preroll_s + CFG.asr.tail_ms / 1e3 + 0.002
    assert finals(out) and wer(NOISY_TEXT, finals(out)[0].text) <= 0.25


async def _paused_turn(asr, estimate) -> list[Frame]:
    """'Hello.' + 700 ms + 'Why is the sky blue?' under the semantic end of turn; an
    estimator that answers each pause's transcript with ``estimate(text)`` (None: no
    estimator, the session has no LLM to read P(end))."""
    from voicepipe.core.turns.semantic import EndOfTurnBoard

    a, sr = read_wav(DATA / "utt12.wav")
    b, _ = read_wav(DATA / "utt11.wav")
    pad = np.zeros(sr // 2, np.float32)
    pause = np.zeros(sr * 7 // 10, np.float32)
    pcm = np.concatenate([pad, _trim(a, sr), pause, _trim(b, sr), pad, pad, pad, pad])
    board = EndOfTurnBoard()
    board.estimator = estimate is not None
    stage = AsrStage(CFG, asr=asr, eot=board)
    out: list[Frame] = []

    async def collect(f: Frame) -> None:
        out.append(f)
        if isinstance(f, TranscriptStable) and board.estimator:  # the LLM stage's part
            board.post(f.turn_id, f.speech_end_media_ns, estimate(f.text), f.text)

    await stage.start()
    try:
        stage.push = collect
        await feed_lockstep(stage, pcm, sr)
        await stage.process(InputEnd())
    finally:
        await stage.stop()
    return out


async def test_a_pause_the_estimate_calls_unfinished_does_not_end_the_turn(asr):
    # Silence alone (no estimator) ends the turn in the 700 ms pause: two turns.
    assert len(finals(await _paused_turn(asr, None))) == 2
    # P(end) low for "Hello" (as for "the capital of …"): one turn, both sentences.
    out = await _paused_turn(asr, lambda text: 0.9 if "sky" in text.lower() else 1e-4)
    (fin,) = finals(out)
    assert wer("Hello. Why is the sky blue?", fin.text) <= 0.2, fin.text
    pauses = [f.attrs for f in out if isinstance(f, SpanFrame) and f.name == "turns.pause"]
    assert pauses[0]["outcome"] == "resumed" and pauses[0]["p_end"] == 1e-4
    assert pauses[-1]["outcome"] == "silence" and pauses[-1]["p_end"] == 0.9


async def test_an_estimate_that_comes_after_the_audio_ends_the_turn_without_more_audio(asr):
    # The estimate of a finished question arrives between two chunks, after the silence
    # it asks for has been heard: the turn ends then, not with the next audio frame (a
    # live client's next chunk is up to 32 ms away).
    from voicepipe.core.turns.semantic import EndOfTurnBoard

    b, sr = read_wav(DATA / "utt11.wav")
    pcm = np.concatenate([np.zeros(sr // 2, np.float32), _trim(b, sr)])
    pcm = np.concatenate([pcm, np.zeros(sr * 48 // 100, np.float32)])  # 480 ms of silence
    board = EndOfTurnBoard()
    board.estimator = True  # the LLM stage's part is played below
    stage = AsrStage(CFG, asr=asr, eot=board)
    out: list[Frame] = []

    async def collect(f: Frame) -> None:
        out.append(f)

    await stage.start()
    try:
        stage.push = collect
        await feed_lockstep(stage, pcm, sr)
        (stable,) = [f for f in out if isinstance(f, TranscriptStable)]
        assert not any(isinstance(f, SpeechEnd) for f in out)  # waiting for the estimate
        board.post(stable.turn_id, stable.speech_end_media_ns, 0.9, stable.text)

        async def ended() -> None:
            while not any(isinstance(f, SpeechEnd) for f in out):  # noqa: ASYNC110
                await asyncio.sleep(0.005)

        await asyncio.wait_for(ended(), 10)  # no audio came meanwhile
        await stage.wait_idle()
    finally:
        await stage.stop()
    (fin,) = finals(out)
    assert wer("Why is the sky blue?", fin.text) <= 0.2, fin.text
    (pause,) = [f.attrs for f in out if isinstance(f, SpanFrame) and f.name == "turns.pause"]
    assert pause["outcome"] == "silence" and pause["p_end"] == 0.9
    assert pause["pause_ms"] >= 400  # the silence heard before the estimate came
