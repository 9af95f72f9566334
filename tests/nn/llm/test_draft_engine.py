"""The EAGLE draft inside the engine: fused vs per-op draft, exact speculation, shared weights.

Runs on the default target in its default format (int4, the fused kernel) with
the committed draft checkpoint.
"""

from __future__ import annotations

import math

import pytest
import torch

from voicepipe.nn import kernels

SYSTEM = "You are a helpful voice assistant. Answer in one to three short spoken sentences."
QUESTIONS = ("How do I make a cup of tea?", "What is a haiku?")


@pytest.fixture(scope="module")
def engine():
    from voicepipe.nn.llm.engine import load_engine

    return load_engine("smollm2-135m", "int4", "smollm2-draft", k=2, max_len=512)


def _ids(eng, q: str) -> list[int]:
    return eng.tokenizer.chat_ids(
        [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": q},
        ]
    )


def _plain(eng, ids: list[int], n: int) -> list[int]:
    from voicepipe.nn.llm.engine import ModelTarget
    from voicepipe.speculative.loop import SpeculativeDecoder

    dec = SpeculativeDecoder(ModelTarget(eng.model, 512), None)
    return [t for s in dec.generate(ids, n, set(eng.tokenizer.stop_ids)) for t in s]


def test_engine_builds_the_eagle_drafter(engine) -> None:
    from voicepipe.nn.llm.draft_spec import EagleProposer, FeatureTarget

    assert engine.eagle is not None
    assert isinstance(engine.target, FeatureTarget)
    assert isinstance(engine.proposer, EagleProposer)
    assert engine.proposer.t is engine.target  # the proposer reads this session's features
    assert engine.proposer.runner.fused == (engine.model.fused is not None)
    # The engine's K for this drafter (measured, see load_engine): short drafts, no pauses,
    # and a longer one only when the draft is sure of it.
    from voicepipe.nn.llm.engine import TUNINGS

    EAGLE_ALT_MIN, EAGLE_K, EAGLE_MIN_PATH = (
        TUNINGS.eagle_alt_min,
        TUNINGS.eagle_k,
        TUNINGS.eagle_min_path,
    )

    assert engine.k_max == EAGLE_K and engine.verify_cost == 1.0
    assert engine.proposer.min_path == EAGLE_MIN_PATH > 0
    # Runner-ups as sibling leaves, where the target scores trees (the fused kernel).
    assert engine.proposer.alt_min == EAGLE_ALT_MIN > 0
    assert engine.target.tree == (engine.model.fused is not None)


def test_eagle_drafts_on_only_while_sure(engine) -> None:
    prop = engine.fork().proposer
    t = prop.t
    ids = _ids(engine, QUESTIONS[0])
    t.prefill(ids[:-1])
    prop.min_path = 0.0
    full = prop.propose(ids, 4)
    assert len(full.tokens) == 4 and len(prop.confs) == 4
    confs = list(prop.confs)
    assert all(0.0 < c <= 1.0 for c in confs)
    path = 1.0
    for i in range(3):  # each threshold cuts the proposal where its path probability drops below
        path *= confs[i]
        prop.min_path = path + 1e-6
        cut = prop.propose(ids, 4)
        assert cut.tokens == full.tokens[: i + 1], i
    prop.min_path = 1.01  # never sure enough: still one guess (a 2-row pass costs ~1 decode)
    assert prop.propose(ids, 4).tokens == full.tokens[:1]


def test_siblings_fit_in_the_targets_cache(engine) -> None:
    from voicepipe.nn.llm.draft_spec import attach

    if engine.model.fused is None:
        pytest.skip("trees need the fused kernel")
    ids = _ids(engine, QUESTIONS[0])
    n = len(ids) - 1
    # Room for the last token, 2 guesses and 1 sibling: every runner-up (alt_min 0)
    # would be 4 more rows.
    t, prop = attach(engine.model, engine.eagle, max_len=n + 4, alt_min=0.0)
    t.prefill(ids[:-1])
    p = prop.propose(ids, 2)
    assert len(p.tokens) == 2 and len(p.siblings) == 1
    ((d, x),) = p.siblings
    assert t.score([ids[-1], *p.tokens, x], [-1, 0, 1, d]).logits.shape[0] == 4


@pytest.mark.parametrize("k, adaptive", [(1, False), (3, False), (2, True)])
def test_engine_speculation_is_token_identical(engine, k: int, adaptive: bool) -> None:
    from dataclasses import replace

    from voicepipe.speculative.metrics import SpecMetrics

    eng = replace(engine.fork(), k=k, adaptive=adaptive, k_max=max(k, engine.k_max))
    stop = set(eng.tokenizer.stop_ids)
    total = SpecMetrics()
    for q in QUESTIONS:
        ids = _ids(eng, q)
        dec = eng.decoder()
        spec = [t for s in dec.generate(ids, 32, stop) for t in s]
        assert spec == _plain(eng, ids, 32), q
        total.merge(dec.metrics)
    assert total.drafted > 0
    # A trained draft gets a real share of its first guesses right (untrained ≈ 0).
    assert total.accept_by_pos[0] > 0.2
    if eng.target.tree:  # runner-ups were verified beside the guesses, and some were taken
        assert total.siblings > 0 and total.sibling_hits > 0


def test_hybrid_drafter_is_token_identical_and_uses_both() -> None:
    from voicepipe.nn.llm.engine import load_engine
    from voicepipe.speculative.hybrid import HybridProposer

    eng = load_engine(
        "smollm2-135m", "int4", "ngram+smollm2-draft", k=3, adaptive=False, max_len=512
    )
    assert isinstance(eng.proposer, HybridProposer)
    from voicepipe.nn.llm.engine import TUNINGS

    EAGLE_K = TUNINGS.eagle_k

    assert eng.proposer.draft_k == EAGLE_K < eng.k_max  # the lookup may draft longer
    stop = set(eng.tokenizer.stop_ids)
    text = "The quick brown fox jumps over the lazy dog near the old mill by the river."
    for q in (f'Repeat exactly: "{text}"', QUESTIONS[0]):
        ids = _ids(eng, q)
        dec = eng.decoder()
        spec = [t for s in dec.generate(ids, 32, stop) for t in s]
        assert spec == _plain(eng, ids, 32), q
    assert eng.proposer.used_ngram > 0  # the quote came from prompt lookup
    assert dec.metrics.drafted > 0  # the plain question from the draft
    # The draft ships its reply store (models/smollm2-draft/replies.npz), behind lookup.
    assert eng.replies is not None and eng.proposer.store is not None
    assert eng.proposer.used_store > 0
    # [llm] reply_store = false: lookup and the draft only (the weights are shared).
    off = load_engine(
        "smollm2-135m", "int4", "ngram+smollm2-draft", k=3, max_len=512, reply_store=False
    )
    assert off.replies is None and off.proposer.store is None and off.fork().proposer.store is None


def test_forks_share_weights_and_keep_their_own_caches(engine) -> None:
    from voicepipe.nn.llm.engine import load_engine

    a, b = engine.fork(), engine.fork()
    assert a.eagle is b.eagle is engine.eagle  # draft weights prepared once
    assert a.proposer.runner is b.proposer.runner
    assert a.proposer.cache is not b.proposer.cache
    assert a.target.cache is not b.target.cache and a.target.feats is not b.target.feats
    again = load_engine("smollm2-135m", "int4", "smollm2-draft", k=2, max_len=512)
    assert again.model is engine.model and again.eagle is engine.eagle  # process-wide
    # Interleaved sessions do not disturb each other's caches.
    stop = set(engine.tokenizer.stop_ids)
    ids_a, ids_b = _ids(a, QUESTIONS[0]), _ids(b, QUESTIONS[1])
    ga, gb = a.decoder().generate(ids_a, 24, stop), b.decoder().generate(ids_b, 24, stop)
    out_a: list[int] = []
    out_b: list[int] = []
    # One step of each in turn until both end (zip would drop the step it drew
    # from one generator when the other is exhausted).
    live = [(ga, out_a), (gb, out_b)]
    while live:
        for g, out in list(live):
            step = next(g, None)
            if step is None:
                live.remove((g, out))
            else:
                out += step
    assert out_a == _plain(engine, ids_a, 24)
    assert out_b == _plain(engine, ids_b, 24)


def test_fused_draft_matches_per_op_draft(engine) -> None:
    # Same weights, two paths: the fused kernel quantizes activations to int8 and
    # the layer's weights to int4 (on the int4 target; Q4_1-shaped, 32 per block)
    # and fc to per-row int8; the per-op reference runs those same rounded weights
    # in fp32 arithmetic (the draft is trained through that rounding, --qat, so the
    # unrounded weights are not the model the engine runs). Predicted features must
    # agree closely and the fused top token must be the reference's, or close to it
    # in the reference's scores.
    import copy

    from voicepipe.nn.llm.draft_spec import FeatureTarget, load_draft, prepare
    from voicepipe.nn.llm.fake_quant import draft_rounding

    if kernels.llama_step() is None or engine.model.fused is None:
        pytest.skip("no fused kernel here: only the per-op draft runs")
    m = engine.model
    draft = load_draft("smollm2-draft")
    rounded = copy.deepcopy(draft)
    with torch.no_grad():
        for name, w in rounded.named_parameters():
            r = draft_rounding(name, w.float())
            if r is not None:
                w.copy_(r)
    fast, ref = prepare(draft, m, fused=True), prepare(rounded, m, fused=False)
    assert fast.fused and not ref.fused
    rows = m.embed[draft.vocab].float()  # the reduced head, unquantized
    ids = _ids(engine, QUESTIONS[0])
    t = FeatureTarget(m, 512)
    t.prefill(ids)
    n = len(ids) - 1
    f = t.feats[:n]
    cf, cr = fast.new_cache(512), ref.new_cache(512)
    with torch.inference_mode():
        hf, gf = fast.step(cf, f, ids[1 : n + 1], 0)  # catch-up over n rows, then single rows
        hr, gr = ref.step(cr, f, ids[1 : n + 1], 0)
        for i in range(4):
            cos = torch.nn.functional.cosine_similarity(hf, hr, dim=0)
            assert cos > 0.99, (i, float(cos))
            scores = hr @ rows.T
            # A flip within the int4/int8 noise: over 4 prompts × 8 steps the fused pick
            # trailed the reference's top score by up to 0.37 std (old and new q4 kernels;
            # a one-off probe, 2026-11-22, with the block-major int4 layout).
            rf, pf = gf.row, gf.conf
            assert float(scores.max() - scores[rf]) <= 0.5 * float(scores.std()), i
            # The draft's confidence: the softmax probability of its pick under its head,
            # here recomputed from the fused feature in fp32. The kernel's head quantizes
            # that feature to int8 per 32 values, which moves a logit by up to ~0.1 and a
            # log-probability by twice that (0.22 at a near-tie on this prompt: 0.50 vs
            # 0.62); a wrong softmax or a wrong row would be off by far more.
            own = torch.softmax(hf @ rows.T, dim=0)
            p_own = float(own[rf])
            assert 0.0 < pf <= 1.0 and abs(math.log(pf / p_own)) < 0.3, (i, pf, p_own)
            # The runner-ups: the next rows of the same scores, with their probabilities,
            # which carry the noise of two logits (measured 0.45 here at p ≈ 0.04).
            assert len(set(gf.rows)) == 3 and list(gf.confs) == sorted(gf.confs, reverse=True)
            for r, p in zip(gf.rows[1:], gf.confs[1:], strict=True):
                assert 0.0 < p and abs(math.log(p / float(own[r]))) < 0.7, i
            assert float(own.topk(4).values[3]) <= float(own[gf.rows[2]]) * 2.0, i
            tok = draft.vocab[gr.row]
            hf, gf = fast.step(cf, hr[None], [tok], n + i)
            hr, gr = ref.step(cr, hr[None], [tok], n + i)
    assert cf.length == cr.length == n + 4


def test_an_unreadable_reply_store_names_the_fix(tmp_path) -> None:
    import shutil

    from voicepipe.nn.llm.draft_model import DraftError
    from voicepipe.nn.llm.draft_spec import draft_path
    from voicepipe.nn.llm.engine import shared_replies

    ckpt = tmp_path / "draft.pt"
    shutil.copy(draft_path("smollm2-draft"), ckpt)
    assert shared_replies(str(ckpt)) is None  # none beside it: lookup and the draft only
    (tmp_path / "replies.npz").write_bytes(b"not an npz")
    with pytest.raises(DraftError, match=r"unreadable.*train draft --stage replies.*reply_store"):
        shared_replies(str(ckpt))
