"""The one speculative loop on codec frames: greedy equivalence, rule behaviour, adaptive K.

The codec LM runs ``spec.loop.SpeculativeDecoder`` like the text LLM, through
``nn.codec_lm_decode``'s target (with its codebook ``levels``) and proposer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from voicepipe.nn.tts.codec_lm import CodecLM, ModelArgs, init_weights
from voicepipe.nn.tts.codec_tts import CodecLMProposer, CodecLMTarget
from voicepipe.nn.tts.phonemes import align
from voicepipe.speculative import rules
from voicepipe.speculative.adaptive import AdaptiveK
from voicepipe.speculative.loop import SpeculativeDecoder
from voicepipe.speculative.metrics import SpecMetrics
from voicepipe.speculative.sampling import SamplingParams


def _pair(seed: int = 0):
    torch.manual_seed(seed)
    t = CodecLM(
        ModelArgs(n_phon=30, codebook=16, n_q=2, dim=32, n_layers=2, n_heads=2, max_frames=96)
    )
    d = CodecLM(
        ModelArgs(n_phon=30, codebook=16, n_q=1, dim=16, n_layers=1, n_heads=2, max_frames=96)
    )
    for m in (t, d):
        init_weights(m)
        m.eval()
    dur = [3, 2, 4, 1, 5, 3, 2, 6]
    al = align(dur, n_frames=40)
    f = torch.from_numpy
    ids = torch.randint(1, 30, (1, len(dur)))
    with torch.no_grad():
        ct, cd = (
            m.condition(
                ids,
                f(al.index)[None],
                f(al.ahead)[None],
                f(al.progress)[None],
                f(al.dur_bucket)[None],
            )
            for m in (t, d)
        )
    return t, d, ct, cd


def _run(
    proposer,
    target,
    rule="greedy",
    beta=0.0,
    top_k=3,
    temperature=0.0,
    distance=None,
    k=None,
    seed=0,
) -> tuple[np.ndarray, SpecMetrics]:
    sp = SamplingParams(temperature=temperature, seed=seed)
    ctl = k or AdaptiveK.for_codec(4)
    dec = SpeculativeDecoder(
        target,
        proposer,
        sp,
        k=ctl.k,
        rule=rules.from_config(rule, beta=beta, top_k=top_k, sampling=sp, distance=distance),
        controller=lambda: ctl,
    )
    blocks = [target.levels(out) for out in dec.generate([target.bos], 40)]
    return np.concatenate(blocks), dec.metrics


@pytest.mark.parametrize("rule", ["greedy", "exact", "relaxed"])
def test_greedy_speculation_is_token_identical_to_plain_ar(rule: str) -> None:
    t, d, ct, cd = _pair()
    plain, st0 = _run(None, CodecLMTarget(t, ct))
    spec, st = _run(
        CodecLMProposer(d, cd), CodecLMTarget(t, ct), rule=rule, beta=0.0, k=AdaptiveK.for_codec(3)
    )
    assert plain.shape == (40, 2)
    np.testing.assert_array_equal(spec, plain)
    assert st0.target_passes == 40 and st0.drafts == 0
    assert st.tokens == 40 and st.drafts > 0
    assert st.target_passes < 40 or st.acceptance_rate == 0.0


def test_draft_equal_to_target_accepts_everything_and_saves_passes() -> None:
    t, _, ct, _ = _pair()
    plain, _ = _run(None, CodecLMTarget(t, ct))
    spec, st = _run(
        CodecLMProposer(t, ct),
        CodecLMTarget(t, ct),
        rule="greedy",
        k=AdaptiveK.for_codec(4, adaptive=False),
    )
    np.testing.assert_array_equal(spec, plain)
    assert st.acceptance_rate == 1.0
    assert st.target_passes == 8  # 40 frames / (4 drafts + 1 bonus)
    assert st.mean_accepted_len == 5.0


def test_relaxed_beta_one_accepts_every_sampled_draft() -> None:
    t, d, ct, cd = _pair(1)
    _, st = _run(
        CodecLMProposer(d, cd, temperature=1.0),
        CodecLMTarget(t, ct),
        rule="relaxed",
        beta=1.0,
        temperature=1.0,
        k=AdaptiveK.for_codec(3, adaptive=False),
    )
    assert st.acceptance_rate == 1.0


def test_topk_and_acoustic_rules_run_and_loosen_with_tolerance() -> None:
    t, d, ct, cd = _pair(2)
    rates = []
    for kk in (1, 8):
        _, st = _run(
            CodecLMProposer(d, cd),
            CodecLMTarget(t, ct),
            rule="topk",
            top_k=kk,
            k=AdaptiveK.for_codec(3, adaptive=False),
        )
        rates.append(st.acceptance_rate)
    assert rates[1] >= rates[0]
    cb = np.random.default_rng(0).normal(size=(16, 4))
    dist = np.linalg.norm(cb[:, None] - cb[None], axis=-1)
    dist /= dist.mean()
    _, s0 = _run(
        CodecLMProposer(d, cd),
        CodecLMTarget(t, ct),
        rule="acoustic",
        beta=0.0,
        distance=dist,
        k=AdaptiveK.for_codec(3, adaptive=False),
    )
    _, s1 = _run(
        CodecLMProposer(d, cd),
        CodecLMTarget(t, ct),
        rule="acoustic",
        beta=10.0,
        distance=dist,
        k=AdaptiveK.for_codec(3, adaptive=False),
    )
    assert s1.acceptance_rate == 1.0 and s1.acceptance_rate >= s0.acceptance_rate


def test_adaptive_k_rises_falls_and_switches_off() -> None:
    k = AdaptiveK.for_codec(4, k_max=6)
    k.update(4, 4)
    assert k.next_k() == 5
    for _ in range(10):
        k.update(k.k, 0)
        if k.off_steps:
            break
    assert k.off_steps == 12  # speculation off after sustained rejection
    assert [k.next_k() for _ in range(12)] == [0] * 12
    assert k.next_k() == 2  # probed again with a short draft


def test_text_tuning_shrinks_on_any_rejection_and_pauses_below_break_even() -> None:
    k = AdaptiveK.for_text(4, verify_cost=1.5)
    k.update(4, 3)
    assert k.next_k() == 3  # one rejection: shorter (the codec tuning keeps 4 here)
    k.update(3, 0)  # accepted-per-step average 0.7·3 + 0.3·0 = 2.1: still pays
    assert k.off_steps == 0 and k.next_k() == 2
    for _ in range(3):
        k.update(2, 0)  # 1.47, 1.03, 0.72 …
    k.update(1, 0)  # … 0.50, below break-even 0.5? no: 0.504
    k.update(1, 0)  # 0.35: pause
    assert k.off_steps == 8
    assert [k.next_k() for _ in range(8)] == [0] * 8 and k.next_k() == 1  # K kept


@pytest.mark.parametrize("seed", range(6))
def test_sampled_tolerance_rules_score_every_draft(seed: int) -> None:
    """A sampled correction may equal the draft it replaces (top-k at a temperature): the
    target then still scores every new position (the cache is rolled back, never matched
    against stale rows; the former codec loop returned too few rows here and failed)."""
    t, d, ct, cd = _pair(seed)
    for rule in ("topk", "acoustic"):
        cb = np.random.default_rng(seed).normal(size=(16, 4))
        dist = np.linalg.norm(cb[:, None] - cb[None], axis=-1)
        codes, st = _run(
            CodecLMProposer(d, cd, temperature=0.8, seed=seed),
            CodecLMTarget(t, ct),
            rule=rule,
            top_k=1,
            beta=0.5,
            temperature=0.8,
            distance=dist,
            seed=seed,
        )
        assert codes.shape == (40, 2) and st.tokens == 40
