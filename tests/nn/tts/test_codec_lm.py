"""Codec LM on tiny random models: shapes, causality, KV-cache equivalence, alignment."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from voicepipe.nn.tts.codec_lm import CodecLM, ModelArgs, corrupt_prev, init_weights, lm_loss
from voicepipe.nn.tts.codec_tts import CodecLMTarget
from voicepipe.nn.tts.duration import DurArgs, DurationPredictor, duration_loss
from voicepipe.nn.tts.phonemes import LOOKAHEAD, align, n_frames_for

ARGS = ModelArgs(n_phon=40, codebook=32, n_q=3, dim=32, n_layers=2, n_heads=2, max_frames=128)


def _model(seed: int = 0, args: ModelArgs = ARGS) -> CodecLM:
    torch.manual_seed(seed)
    m = CodecLM(args)
    init_weights(m)
    return m.eval()


def _cond(m: CodecLM, t: int = 20, p: int = 9) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    dur = torch.randint(1, 5, (p,), generator=g).tolist()
    al = align(dur, n_frames=t)
    phon = torch.randint(1, m.args.n_phon, (1, p), generator=g)
    f = torch.from_numpy
    return m.condition(
        phon, f(al.index)[None], f(al.ahead)[None], f(al.progress)[None], f(al.dur_bucket)[None]
    )


def test_alignment_covers_frames_in_order() -> None:
    dur = [8, 2, 3, 0, 5, 4, 12]
    al = align(dur)
    assert al.n_frames == n_frames_for(dur) == -(-round(sum(dur) * 600 * 22050 / 24000) // 1024)
    assert np.all(np.diff(al.index) >= 0)  # monotone
    assert 3 not in al.index  # zero-length phoneme never under a frame centre
    assert al.ahead.shape == (al.n_frames, LOOKAHEAD)
    assert np.all(al.ahead[:, 0] >= al.index) and np.all(al.ahead[:-1, 0] == al.index[1:])
    assert al.progress.min() >= 0 and al.progress.max() < 8


def test_shapes_and_loss_backward() -> None:
    m = _model().train()
    b, t, p = 2, 15, 7
    phon = torch.randint(0, 40, (b, p))
    al = {
        "index": torch.randint(0, p, (b, t)),
        "ahead": torch.randint(0, p, (b, t, LOOKAHEAD)),
        "progress": torch.randint(0, 8, (b, t)),
        "dur_bucket": torch.randint(0, 16, (b, t)),
    }
    codes = torch.randint(0, 32, (b, t, 3))
    prev = corrupt_prev(codes[..., 0], m.args, 0.3, 0.3)
    assert prev.shape == (b, t) and bool((prev[:, 0] == m.args.bos).all())
    mask = torch.ones(b, t, dtype=torch.bool)
    mask[1, 10:] = False
    loss, stats = lm_loss(m, phon, al, prev, codes, mask)
    loss.backward()
    assert set(stats) == {"ce0", "ce_deep", "loss"} and np.isfinite(stats["loss"])
    assert m.head0.weight.grad is not None and m.depth[1].head.weight.grad is not None


def test_causal_future_inputs_do_not_change_past() -> None:
    m = _model()
    cond = _cond(m)
    x = torch.randint(0, 32, (1, 20))
    with torch.no_grad():
        h1 = m(x, cond)
        x2 = x.clone()
        x2[0, 12:] = (x2[0, 12:] + 5) % 32
        h2 = m(x2, cond)
    torch.testing.assert_close(h1[:, :12], h2[:, :12])
    assert not torch.allclose(h1[:, 12:], h2[:, 12:])


def test_kv_cache_matches_full_pass_single_and_multi_step() -> None:
    m = _model()
    cond = _cond(m)
    x = torch.randint(0, 32, (1, 20))
    with torch.no_grad():
        full = m(x, cond)
        kv = m.new_cache(32)
        parts = [m(x[:, :5], cond[:, :5], pos=0, cache=kv)]
        parts += [m(x[:, t : t + 1], cond[:, t : t + 1], pos=t, cache=kv) for t in range(5, 12)]
        parts.append(m(x[:, 12:], cond[:, 12:], pos=12, cache=kv))  # a verify-style pass
        torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-4)
        # rollback: overwrite positions 8.. with other inputs, then restore them
        m(torch.randint(0, 32, (1, 4)), cond[:, 8:12], pos=8, cache=kv)
        again = m(x[:, 8:], cond[:, 8:], pos=8, cache=kv)
        torch.testing.assert_close(again, full[:, 8:], atol=1e-5, rtol=1e-4)
        with pytest.raises(ValueError, match="new_cache"):
            m(x[:, :1], cond[:, :1], pos=0)  # the model holds no cache of its own


class CodecLMScorer:
    """The target seen as the decoder uses it: the logits at positions len(hist)… given
    the drafts, after rolling its cache back to what still matches [bos, *hist]."""

    def __init__(self, m, cond) -> None:
        self.t = CodecLMTarget(m, cond)

    def score(self, hist: list[int], drafts: np.ndarray) -> np.ndarray:
        wanted = [self.t.bos, *hist]
        self.t.rollback(min(self.t._valid(wanted), len(wanted) - 1))
        fed = wanted[self.t.length :] + [int(d) for d in drafts]
        return self.t.score(fed).logits[-(len(drafts) + 1) :]


def test_interleaved_utterances_share_one_model() -> None:
    """Two scorers (two sessions) over the same weights, stepped alternately, each give
    exactly what it gives alone: the decoding state lives outside the model."""
    m = _model()
    c1, c2 = _cond(m), _cond(m, t=20, p=9) * 0.5
    h1, h2 = [3, 7, 1, 30, 2], [9, 9, 4, 0, 12]

    def alone(cond, hist):
        sc = CodecLMScorer(m, cond)
        return [sc.score(hist[:i], np.array([hist[i]])) for i in range(len(hist))]

    ref1, ref2 = alone(c1, h1), alone(c2, h2)
    a, b = CodecLMScorer(m, c1), CodecLMScorer(m, c2)
    for i in range(len(h1)):
        np.testing.assert_array_equal(a.score(h1[:i], np.array([h1[i]])), ref1[i])
        np.testing.assert_array_equal(b.score(h2[:i], np.array([h2[i]])), ref2[i])


def test_scorer_reuses_prefix_and_matches_full_pass() -> None:
    m = _model()
    cond = _cond(m)
    sc = CodecLMScorer(m, cond)
    hist = [3, 7, 1, 30]
    logits = sc.score(hist, np.array([4, 4]))
    with torch.no_grad():
        full = m.logits0(m(torch.tensor([[m.args.bos, *hist, 4, 4]]), cond[:, :7]))[0]
    np.testing.assert_allclose(logits, full[4:7].numpy(), atol=1e-4, rtol=1e-4)
    logits2 = sc.score([*hist, 9], np.array([]))  # diverges at position 5: rollback
    np.testing.assert_allclose(
        logits2[0],
        m.logits0(m(torch.tensor([[m.args.bos, *hist, 9]]), cond[:, :6]))[0, 5].detach().numpy(),
        atol=1e-4,
        rtol=1e-4,
    )
    deep = sc.t.levels([11])  # the codebook levels of one emitted frame
    assert deep.shape == (1, 3) and deep[0, 0] == 11


def test_duration_predictor_shapes_and_loss() -> None:
    torch.manual_seed(0)
    dp = DurationPredictor(DurArgs(n_phon=40, dim=32, n_heads=2)).eval()
    out = dp.predict([0, 5, 6, 7, 0])
    assert len(out) == 5 and all(isinstance(u, int) and u >= 0 for u in out)
    phon = torch.randint(0, 40, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[0, 4:] = False
    loss = duration_loss(dp.train(), phon, torch.randint(0, 9, (2, 6)), mask)
    loss.backward()
    assert torch.isfinite(loss)
