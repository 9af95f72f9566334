"""Smoke test of the committed codec-LM TTS (models/codec-lm-hibari) on real text."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe import config
from voicepipe.config import TtsConfig
from voicepipe.nn.tts.codec_tts import CodecLMTTS


@pytest.fixture(scope="module")
def tts() -> CodecLMTTS:
    return CodecLMTTS.from_config(config.Config())


def test_greedy_speculation_matches_plain_ar_on_the_real_model(tts: CodecLMTTS) -> None:
    text = "Sure! The capital of France is Paris."
    ar, st_ar, _ = tts.decode_codes(text, TtsConfig(rule="ar"))
    spec, st, _ = tts.decode_codes(text, TtsConfig(rule="greedy", spec_k=4))
    np.testing.assert_array_equal(spec, ar)
    assert ar.shape[1] == tts.m.target.args.n_q and 30 < len(ar) < 80  # ~2 s of frames
    assert st["target_passes"] < st_ar["target_passes"] == len(ar)
    assert st["acceptance_rate"] > 0.2  # the draft was trained for this target


def test_streamed_audio_is_speech_length_and_finite(tts: CodecLMTTS) -> None:
    res = tts.synth("Hello there.", TtsConfig(rule="relaxed", beta=0.2, temperature=0.7))
    assert 0.4 < res.audio_s < 2.5
    assert np.isfinite(res.audio).all() and 0.01 < float(np.abs(res.audio).max()) <= 1.0
    assert res.stats["frames"] * 1024 == len(res.audio)
    assert res.ttfa_s <= res.wall_s


def _snr(ref: np.ndarray, test: np.ndarray) -> float:
    return float(10 * np.log10((ref**2).sum() / max(((ref - test) ** 2).sum(), 1e-20)))


def test_streamed_synthesis_equals_whole_utterance_decoding(tts: CodecLMTTS) -> None:
    text = "Your meeting with Anna starts at half past three."
    opts = TtsConfig(rule="greedy")
    codes, _, _ = tts.decode_codes(text, opts)
    whole = tts.codec.decode(codes[:, : tts.codec.q]).numpy()
    res = tts.synth(text, opts)  # first chunk 4 frames, then chunk_frames, tail in pieces
    assert res.audio.shape == whole.shape
    assert _snr(whole, res.audio) >= 25.0  # bf16 vocoder: rounding differs per width


def test_sessions_share_weights_and_do_not_disturb_each_other() -> None:
    cfg = config.Config()
    a, b = CodecLMTTS.shared(cfg), CodecLMTTS.shared(cfg)
    assert a is not b and a.m is b.m and a.codec is b.codec  # one copy of the weights
    opts = TtsConfig(rule="topk", top_k=3)
    ta, tb = "Sure, I can help with that.", "It is sunny and twelve degrees."
    alone_a = np.concatenate(list(a.stream(ta, opts)))
    alone_b = np.concatenate(list(b.stream(tb, opts)))
    # Two sessions' streams advanced alternately, as two TTS stages would.
    ga, gb = a.stream(ta, opts), b.stream(tb, opts)
    out: dict[str, list[np.ndarray]] = {"a": [], "b": []}
    live = {"a": ga, "b": gb}
    while live:
        for name, g in list(live.items()):
            chunk = next(g, None)
            if chunk is None:
                del live[name]
            else:
                out[name].append(chunk)
    np.testing.assert_array_equal(np.concatenate(out["a"]), alone_a)
    np.testing.assert_array_equal(np.concatenate(out["b"]), alone_b)


def test_stream_pushes_only_fixed_widths(tts: CodecLMTTS, monkeypatch) -> None:
    """First chunk, then chunk_frames, the tail in powers of two: few distinct widths,
    so the vocoder's oneDNN primitives are built once (nn/vocoder/hifigan_stream.py)."""
    sizes: list[int] = []
    make = tts.codec.stream_decoder

    def recording(**kw):
        dec = make(**kw)
        push = dec.push

        def rec(codes):
            sizes.append(len(codes))
            return push(codes)

        dec.push = rec
        return dec

    monkeypatch.setattr(tts.codec, "stream_decoder", recording)
    greedy = TtsConfig(rule="greedy", beta=0.0)
    res = tts.synth("Let me check the calendar for tomorrow morning.", greedy)
    assert sum(sizes) * 1024 == len(res.audio) == res.stats["frames"] * 1024
    assert sizes[0] == tts.first_frames
    tail = sizes[1:]
    while tail and tail[0] == tts.chunk_frames:
        tail = tail[1:]
    assert tail == sorted(set(tail), reverse=True)  # distinct, decreasing
    assert all(n & (n - 1) == 0 and n < tts.chunk_frames for n in tail)


# A reply read in one piece past the codec LM's max_frames (1,024 frames, 47.5 s) used to
# fail with "The size of tensor a (4) must match the size of tensor b (3)".
_SENTENCES = [
    "The museum opens at nine in the morning and closes at five in the evening.",
    "Tickets cost twelve dollars for adults and six dollars for children under twelve.",
    "On the first floor you will find paintings from the eighteenth and nineteenth centuries.",
    "The second floor holds sculptures, old maps and a small collection of instruments.",
    "Guided tours start every hour from the main hall, and they last about forty minutes.",
    "The cafe near the garden serves coffee, tea, sandwiches and fresh cakes all day long.",
]
LONG = " ".join(_SENTENCES + _SENTENCES[:4])  # ~52 s


def test_a_text_past_max_frames_is_spoken_in_pieces_cut_at_sentences(tts: CodecLMTTS) -> None:
    plans = tts.plans(LONG)
    assert len(plans) >= 2
    assert sum(al.n_frames for _, _, al in plans) > tts.max_frames  # too long for one pass
    assert all(al.n_frames <= tts.max_frames for _, _, al in plans)
    assert " ".join(p for p, _, _ in plans) == LONG
    assert all(p.endswith(".") for p, _, _ in plans)  # cut at sentence ends, not mid-sentence
    codes, stats, _ = tts.decode_codes(LONG, TtsConfig(rule="topk", top_k=3))
    assert codes.shape == (sum(al.n_frames for _, _, al in plans), tts.m.target.args.n_q)
    assert stats["frames"] == len(codes) and stats["acceptance_rate"] > 0.2
    # The pieces follow each other as one utterance: each piece's frames are what that
    # piece alone decodes to (same rule, same seed).
    last = tts.decode_codes(plans[-1][0], TtsConfig(rule="topk", top_k=3))[0]
    np.testing.assert_array_equal(codes[-len(last) :], last)


def test_given_durations_too_long_for_one_pass_are_a_clear_error(tts: CodecLMTTS) -> None:
    from voicepipe.nn.tts.hibari_teacher import text_to_ids

    ids = text_to_ids("Hello there.")
    with pytest.raises(ValueError, match="max_frames"):
        next(tts.codes("Hello there.", TtsConfig(), durations=[200] * len(ids)))


def test_warm_up_runs_once_per_process_not_per_session(monkeypatch) -> None:
    """A session's TTS instance holds no state of its own: warming the shared codec
    again (a synthesis per session start) was pure cost for every live session."""
    cfg = config.Config()
    CodecLMTTS.shared(cfg).warm_up()  # the process's (the server's preload)
    session = CodecLMTTS.shared(cfg)

    def no_synthesis(*a: object, **k: object) -> None:
        raise AssertionError("a session's warm-up synthesized again")

    monkeypatch.setattr(session, "stream", no_synthesis)
    session.warm_up()
