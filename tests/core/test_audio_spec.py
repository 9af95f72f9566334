"""Speculative decoding of codec frames: greedy equivalence, rule behaviour, adaptive K."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from voicepipe.core.audio_spec import AdaptiveK, SpecStats, decode
from voicepipe.nn.codec_lm import CodecLM, ModelArgs, init_weights
from voicepipe.nn.codec_tts import CodecLMDrafter, CodecLMScorer
from voicepipe.nn.phonemes import align


def _pair(seed: int = 0):
    torch.manual_seed(seed)
    t = CodecLM(ModelArgs(n_phon=30, codebook=16, n_q=2, dim=32, n_layers=2, n_heads=2,
                          max_frames=96))
    d = CodecLM(ModelArgs(n_phon=30, codebook=16, n_q=1, dim=16, n_layers=1, n_heads=2,
                          max_frames=96))
    for m in (t, d):
        init_weights(m)
        m.eval()
    dur = [3, 2, 4, 1, 5, 3, 2, 6]
    al = align(dur, n_frames=40)
    f = torch.from_numpy
    ids = torch.randint(1, 30, (1, len(dur)))
    with torch.no_grad():
        ct, cd = (m.condition(ids, f(al.index)[None], f(al.ahead)[None], f(al.progress)[None],
                              f(al.dur_bucket)[None]) for m in (t, d))
    return t, d, ct, cd


def _run(drafter, scorer, **kw) -> tuple[np.ndarray, SpecStats]:
    st = SpecStats()
    blocks = list(decode(drafter, scorer, 40, stats=st, **kw))
    return np.concatenate(blocks), st


@pytest.mark.parametrize("rule", ["greedy", "exact", "relaxed"])
def test_greedy_speculation_is_token_identical_to_plain_ar(rule: str) -> None:
    t, d, ct, cd = _pair()
    plain, st0 = _run(None, CodecLMScorer(t, ct))
    spec, st = _run(CodecLMDrafter(d, cd), CodecLMScorer(t, ct), rule=rule, beta=0.0,
                    k=AdaptiveK(k=3, adaptive=True))
    assert plain.shape == (40, 2)
    np.testing.assert_array_equal(spec, plain)
    assert st0.target_passes == 40 and st0.drafts == 0
    assert st.frames == 40 and st.drafts > 0
    assert st.target_passes < 40 or st.acceptance_rate == 0.0


def test_draft_equal_to_target_accepts_everything_and_saves_passes() -> None:
    t, _, ct, _ = _pair()
    plain, _ = _run(None, CodecLMScorer(t, ct))
    spec, st = _run(CodecLMDrafter(t, ct), CodecLMScorer(t, ct), rule="greedy",
                    k=AdaptiveK(k=4, adaptive=False))
    np.testing.assert_array_equal(spec, plain)
    assert st.acceptance_rate == 1.0
    assert st.target_passes == 8  # 40 frames / (4 drafts + 1 bonus)
    assert st.mean_accepted_len == 5.0


def test_relaxed_beta_one_accepts_every_sampled_draft() -> None:
    t, d, ct, cd = _pair(1)
    _, st = _run(CodecLMDrafter(d, cd, temperature=1.0), CodecLMScorer(t, ct), rule="relaxed",
                 beta=1.0, temperature=1.0, k=AdaptiveK(k=3, adaptive=False))
    assert st.acceptance_rate == 1.0


def test_topk_and_acoustic_rules_run_and_loosen_with_tolerance() -> None:
    t, d, ct, cd = _pair(2)
    rates = []
    for kk in (1, 8):
        _, st = _run(CodecLMDrafter(d, cd), CodecLMScorer(t, ct), rule="topk", top_k=kk,
                     k=AdaptiveK(k=3, adaptive=False))
        rates.append(st.acceptance_rate)
    assert rates[1] >= rates[0]
    cb = np.random.default_rng(0).normal(size=(16, 4))
    dist = np.linalg.norm(cb[:, None] - cb[None], axis=-1)
    dist /= dist.mean()
    _, s0 = _run(CodecLMDrafter(d, cd), CodecLMScorer(t, ct), rule="acoustic", beta=0.0,
                 distance=dist, k=AdaptiveK(k=3, adaptive=False))
    _, s1 = _run(CodecLMDrafter(d, cd), CodecLMScorer(t, ct), rule="acoustic", beta=10.0,
                 distance=dist, k=AdaptiveK(k=3, adaptive=False))
    assert s1.acceptance_rate == 1.0 and s1.acceptance_rate >= s0.acceptance_rate


def test_adaptive_k_rises_falls_and_switches_off() -> None:
    k = AdaptiveK(k=4, k_max=6)
    k.update(4, 4)
    assert k.current() == 5
    for _ in range(10):
        k.update(k.current() or 1, 0)
        if k.current() == 0:
            break
    assert k.current() == 0  # speculation off after sustained rejection
    for _ in range(k.off_frames):
        k.update(0, 0)
    assert k.current() == 2  # probed again with a short draft
