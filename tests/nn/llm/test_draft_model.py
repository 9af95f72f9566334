"""EAGLE-style draft: reduced vocabulary, checkpoints, cached decoding, exact speculation."""

from __future__ import annotations

import pytest
import torch

from voicepipe.nn.llm.draft_model import (
    DraftArgs,
    DraftError,
    EagleDraft,
    load,
    reduced_vocab,
    save,
    to_reduced,
)

TINY = DraftArgs(
    dim=32,
    n_head=4,
    n_kv_head=2,
    head_dim=8,
    ffn_dim=48,
    n_layer=2,
    rope_base=10000.0,
    target_vocab=100,
)


def _tiny(seed: int = 0) -> EagleDraft:
    torch.manual_seed(seed)
    m = EagleDraft(TINY, torch.tensor([1, 5, 7, 42, 99]))
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return m.eval()


def test_reduced_vocab_takes_most_frequent_and_always_ids() -> None:
    counts = torch.zeros(50, dtype=torch.long)
    counts[[3, 10, 20, 30]] = torch.tensor([5, 50, 7, 1])
    v = reduced_vocab(counts, 4, always=[49])
    assert v.tolist() == [3, 10, 20, 49]  # ascending; 30 (count 1) lost to the forced 49
    # Unseen ids fill the rest, lowest (earliest BPE merges) first.
    v6 = reduced_vocab(counts, 6)
    assert set(v6.tolist()) == {3, 10, 20, 30, 0, 1}


def test_reduced_mapping_round_trips() -> None:
    vocab = torch.tensor([2, 9, 17, 40])
    m = to_reduced(vocab, 50)
    assert torch.equal(vocab[m[vocab]], vocab)  # full → reduced → full
    assert torch.equal(m[vocab], torch.arange(4))
    outside = torch.tensor([0, 1, 3, 49])
    assert (m[outside] == -1).all()  # never proposable


def test_cached_decoding_matches_full_forward() -> None:
    # Inference feeds the draft row by row (plus a batched catch-up) through its
    # KV cache; training runs the full causal forward. Both must agree.
    m = _tiny()
    T = 9
    f, e = torch.randn(1, T, TINY.dim), torch.randn(1, T, TINY.dim)
    with torch.inference_mode():
        full = m(f, e)
        cache = m.new_cache(32)
        a = m(f[:, :5], e[:, :5], cache, 0)
        rows = [m(f[:, i : i + 1], e[:, i : i + 1], cache, i) for i in range(5, T)]
    got = torch.cat([a, *rows], dim=1)
    torch.testing.assert_close(got, full, atol=1e-5, rtol=1e-4)
    # A rollback then re-feed reproduces the same rows.
    with torch.inference_mode():
        cache.rollback(6)
        again = m(f[:, 6:], e[:, 6:], cache, 6)
    torch.testing.assert_close(again, full[:, 6:], atol=1e-5, rtol=1e-4)


def test_unrolled_depths_match_drafting_through_the_cache() -> None:
    # Training-time test: depth s of unroll must be what inference computes when
    # it drafts s tokens past the last true row: true rows through the cache,
    # then each step fed the previous step's predicted feature.
    m = _tiny(1)
    T, n = 10, 6
    f, e = torch.randn(1, T, TINY.dim), torch.randn(1, T, TINY.dim)
    with torch.inference_mode():
        un = m(f, e, depths=3)
        assert un.shape == (3, 1, T, TINY.dim)
        torch.testing.assert_close(un[0], m(f, e), atol=1e-5, rtol=1e-4)
        for start in (n, 1, T - 2):  # the last true row is start - 1
            cache = m.new_cache(32)
            h = m(f[:, :start], e[:, :start], cache, 0)[:, -1:]
            torch.testing.assert_close(h[0, 0], un[0, 0, start - 1], atol=1e-5, rtol=1e-4)
            for s in (1, 2):
                q = start - 1 + s  # the row drafted s tokens deep
                if q >= T:
                    break
                h = m(h, e[:, q : q + 1], cache, q)
                torch.testing.assert_close(h[0, 0], un[s, 0, q], atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="without a cache"):
        m(f, e, m.new_cache(32), depths=2)


def test_checkpoint_round_trip_is_fp16(tmp_path) -> None:
    m = _tiny(1)
    path = tmp_path / "d.pt"
    save(m, path, {"step": 3})
    raw = torch.load(path, weights_only=True)
    assert all(v.dtype == torch.float16 for k, v in raw["state"].items() if k != "vocab")
    m2, meta = load(path)
    assert meta == {"step": 3}
    assert torch.equal(m2.vocab, m.vocab)
    f, e = torch.randn(1, 4, TINY.dim), torch.randn(1, 4, TINY.dim)
    with torch.inference_mode():
        torch.testing.assert_close(m2(f, e), m(f, e), atol=2e-2, rtol=2e-2)


def test_checkpoint_errors_name_file_and_fix(tmp_path) -> None:
    missing = tmp_path / "nope.pt"
    with pytest.raises(DraftError, match="nope.pt.*voicepipe models pull smollm2-draft"):
        load(missing)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(DraftError, match="junk.pt: not a readable"):
        load(junk)
    other = tmp_path / "other.pt"
    torch.save({"format": "something-else"}, other)
    with pytest.raises(DraftError, match="other.pt: not a voicepipe-eagle-draft"):
        load(other)
    bad = tmp_path / "bad.pt"
    save(_tiny(), bad)
    ck = torch.load(bad, weights_only=True)
    ck["args"]["dim"] = 64  # weights no longer fit the declared shape
    torch.save(ck, bad)
    with pytest.raises(DraftError, match="does not match"):
        load(bad)


# --- the committed checkpoint with the real default target -------------------


@pytest.fixture(scope="module")
def target():
    from voicepipe.nn.llm.engine import gguf_path, shared_model
    from voicepipe.nn.llm.tokenizer import ChatTokenizer

    m, _ = shared_model(gguf_path("smollm2-135m"), "int8", 512)  # one load per test process
    return m, ChatTokenizer(m.metadata)


def test_committed_draft_is_exact_and_accepts(target) -> None:
    from voicepipe.nn.llm.draft_spec import attach, load_draft
    from voicepipe.nn.llm.engine import ModelTarget
    from voicepipe.speculative.loop import SpeculativeDecoder
    from voicepipe.speculative.metrics import SpecMetrics
    from voicepipe.speculative.sampling import SamplingParams

    m, tok = target
    stop = set(tok.stop_ids)
    ft, prop = attach(m, load_draft("smollm2-draft"))
    plain_dec = SpeculativeDecoder(ModelTarget(m), None)
    dec = SpeculativeDecoder(ft, prop, SamplingParams(), k=3, adaptive=False)
    total = SpecMetrics()
    for question in ("How do I make a cup of tea?", "What is a haiku?"):
        ids = tok.chat_ids(
            [
                {"role": "system", "content": "You are a helpful voice assistant."},
                {"role": "user", "content": question},
            ]
        )
        plain = [t for s in plain_dec.generate(ids, 32, stop) for t in s]
        spec = [t for s in dec.generate(ids, 32, stop) for t in s]
        assert spec == plain, question
        total.merge(dec.metrics)
    assert total.drafted > 0
    # A trained draft gets a real share of its first guesses right (untrained ≈ 0).
    assert total.accept_by_pos[0] > 0.2


def test_a_windowed_draft_reads_only_the_context_tail_and_stays_exact(target) -> None:
    # The draft's cache starts at the window over a context it has not seen (a session's
    # served prompt), keeps growing with the reply, and starts again when the context
    # changes before its first row; greedy output stays the plain decode's.
    from voicepipe.nn.llm.draft_spec import attach, load_draft
    from voicepipe.nn.llm.engine import ModelTarget
    from voicepipe.speculative.loop import SpeculativeDecoder
    from voicepipe.speculative.metrics import SpecMetrics
    from voicepipe.speculative.sampling import SamplingParams

    m, tok = target
    stop = set(tok.stop_ids)
    ids = tok.chat_ids(
        [
            {"role": "system", "content": "You are a helpful voice assistant. " * 6},
            {"role": "user", "content": "How do I make a cup of tea?"},
        ]
    )
    plain = [t for s in SpeculativeDecoder(ModelTarget(m), None).generate(ids, 32, stop) for t in s]
    draft = load_draft("smollm2-draft")
    ft, prop = attach(m, draft, window=16)
    dec = SpeculativeDecoder(ft, prop, SamplingParams(), k=3, adaptive=False)
    assert [t for s in dec.generate(ids, 32, stop) for t in s] == plain
    assert prop.off > len(ids) - 16 - 1  # the cache began inside the window...
    assert prop.cache.length < 16 + 32 + 1  # ...and holds the window and the reply only
    total = SpecMetrics()
    total.merge(dec.metrics)
    assert total.drafted > 0 and total.accept_by_pos[0] > 0.2
    # A context that differs before the cache's first row: the cache starts over.
    other = [ids[0] + 1, *ids[1:]]
    ft.prefill(other[:-1])
    prop.propose(other, 2)
    assert prop.off == len(other) - 1 - 16
    # No window: the whole context, from position 0.
    ft2, whole = attach(m, draft)
    dec2 = SpeculativeDecoder(ft2, whole, SamplingParams(), k=3, adaptive=False)
    assert [t for s in dec2.generate(ids, 32, stop) for t in s] == plain
    assert whole.off == 0
