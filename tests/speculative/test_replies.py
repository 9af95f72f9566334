"""Retrieval drafting from a store of past replies (spec.replies), against a brute force."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from tests.speculative.test_hybrid import Fixed
from voicepipe.speculative.hybrid import HybridProposer
from voicepipe.speculative.ngram import NgramProposer
from voicepipe.speculative.replies import ReplyIndex, ReplyProposer

# Two prompt tokens (90, 91: a chat header) before each reply.
RECORDS = [
    ([90, 91, 1, 2, 3, 4, 5], 2),
    ([90, 91, 1, 2, 3, 4, 6], 2),
    ([90, 91, 1, 2, 3, 7], 2),
    ([90, 91, 8, 2, 3, 4, 5], 2),
]


@pytest.mark.parametrize("small", [0, 64])
def test_longest_match_and_majority_continuation(small: int) -> None:
    ix = ReplyIndex.from_records(RECORDS)
    ix.small = small
    assert len(ix) == 5 + 5 + 4 + 5  # reply tokens only
    # "2 3" occurs 4 times; "1 2 3" 3 times; "9 1 2 3" never (the context's own 9).
    m = ix.match([9, 1, 2, 3])
    assert m.order == 3 and m.hi - m.lo == 3
    # After "1 2 3": 4 (2 of 3), then 5 / 6 split evenly among those two.
    toks, shares = ix.continuation(m, 5, min_path=0.0)
    assert toks == [4] and shares == [pytest.approx(2 / 3)]  # a 1-of-2 step has one agreeing
    toks, _ = ix.continuation(m, 5, min_path=0.7)
    assert toks == []  # 2/3 < 0.7
    # "8 2 3" once only: the longest match seen twice is "2 3" (4 of them, 3 go on with 4).
    m = ix.match([8, 2, 3], min_count=2)
    assert m.order == 2
    assert ix.continuation(m, 3, min_path=0.45) == ([4, 5], [0.75, pytest.approx(2 / 3)])
    assert ix.continuation(m, 3, min_path=0.55)[0] == [4]  # 0.75 · 2/3 = 0.5


def test_a_reply_opening_is_found_after_the_prompt_tail_and_prompts_are_never_proposed() -> None:
    ix = ReplyIndex.from_records(RECORDS)
    m = ix.match([5, 90, 91])  # the header: every reply's first token follows it
    assert m.order == 2 and m.hi - m.lo == 4
    assert ix.continuation(m, 4, min_path=0.55) == ([1, 2, 3], [0.75, 1.0, 1.0])
    assert not {90, 91} & set(ix.flat[ix.pos].tolist())  # prompt tokens are never proposed
    assert ix.match([4, 5]).order == 0  # nothing follows a reply's last token


def brute(records, context, k, min_path, max_n=8, min_count=2):
    """The same rule by scanning every reply position: longest suffix seen ≥ min_count
    times (n-grams may start in a record's prompt tail), then the majority path."""
    occ = {}
    for toks, at in records:
        for e in range(at, len(toks)):
            for n in range(1, min(max_n, e) + 1):
                occ.setdefault(tuple(toks[e - n : e]), []).append((toks, e))
    best = []
    order = 0
    for n in range(1, min(max_n, len(context)) + 1):
        c = occ.get(tuple(context[-n:]), [])
        if len(c) < min_count:
            break
        best, order = c, n
    out, path = [], 1.0
    cand = best
    for step in range(k):
        nxt = [t[e + step] if e + step < len(t) else None for t, e in cand]
        cnt = Counter(x for x in nxt if x is not None)
        if not cnt:
            break
        tok, c = sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        share = c / len(nxt)
        if c < min_count or path * share < min_path:
            break
        path *= share
        out.append(tok)
        cand = [x for x, y in zip(cand, nxt, strict=True) if y == tok]
    return order, out


@pytest.mark.parametrize("small", [0, 3, 64])  # numpy only; both, switching; Python only
@pytest.mark.parametrize("seed", range(6))
# Token ids from 0: 16-bit keys, four a word; from 151,640 (Qwen2.5's <|im_end|> is
# 151,645): 21-bit keys, three a word.
@pytest.mark.parametrize("base", [0, 151_640])
def test_matches_a_brute_force_scan(seed: int, small: int, base: int) -> None:
    rng = random.Random(seed)
    records = []
    for _ in range(40):
        prefix = [base + rng.randrange(50, 53) for _ in range(rng.randrange(0, 3))]
        reply = [base + rng.randrange(0, 6) for _ in range(rng.randrange(1, 12))]
        records.append((prefix + reply, len(prefix)))
    max_n = (3, 5, 8)[seed % 3]  # one packed word, then two (three with 21-bit keys)
    ix = ReplyIndex.from_records(records, max_n=max_n)
    assert ix.bits == (16 if base == 0 else 21)
    ix.small = small
    for _ in range(60):
        ctx = [
            base + (rng.randrange(0, 6) if rng.random() < 0.9 else 51)
            for _ in range(rng.randrange(1, 11))
        ]
        min_path = rng.choice([0.0, 0.3, 0.6])
        m = ix.match(ctx)
        order, want = brute(records, ctx, 4, min_path, max_n=max_n)
        assert m.order == order, ctx
        got = ix.continuation(m, 4, min_path)[0] if m.order else []
        # Ties between equally frequent tokens: the index takes the smallest token too.
        assert got == want, (ctx, min_path)


def test_the_proposer_needs_min_n_and_caps_at_k() -> None:
    p = ReplyProposer(ReplyIndex.from_records(RECORDS), min_n=2, min_path=0.5)
    assert p.propose([90, 91], 2).tokens == [1, 2]
    assert p.propose([90, 91], 0).tokens == []
    assert p.propose([7, 3], 4).tokens == []  # "3" alone is a 1-token match: too short
    q = ReplyProposer(ReplyIndex.from_records(RECORDS), min_n=3, min_path=0.5)
    assert q.propose([90, 91], 2).tokens == []


def test_save_and_load_round_trip(tmp_path) -> None:
    recs = [(np.array(t, dtype=np.uint16), r) for t, r in RECORDS]
    lens = [len(t) for t, _ in recs]
    path = tmp_path / "replies.npz"
    np.savez_compressed(
        path,
        tokens=np.concatenate([t for t, _ in recs]),
        bounds=np.concatenate([[0], np.cumsum(lens)]),
        reply_at=np.array([r for _, r in recs]),
    )
    a, b = ReplyIndex.load(str(path)), ReplyIndex.from_records(RECORDS)
    assert np.array_equal(a.pos, b.pos) and np.array_equal(a.words, b.words)


def test_bad_stores_are_refused() -> None:
    with pytest.raises(ValueError, match="bounds"):
        ReplyIndex(np.arange(5), np.array([0, 3]), np.array([0]))
    with pytest.raises(ValueError, match="non-empty"):
        ReplyIndex(np.arange(5), np.array([0, 0, 5]), np.array([0, 0]))
    with pytest.raises(ValueError, match="pack"):
        ReplyIndex(np.array([1, 1 << 21]), np.array([0, 2]), np.array([0]))
    with pytest.raises(ValueError, match="max_n"):
        ReplyIndex(np.arange(5), np.array([0, 5]), np.array([0]), max_n=9)
    # A context token the store cannot hold matches nothing, and stops the match there.
    ix = ReplyIndex.from_records(RECORDS)
    assert ix.match([70000, 90, 91]).order == 2
    assert ix.match([90, 70000]).order == 0


def test_the_hybrid_asks_the_store_after_lookup_and_before_the_model() -> None:
    draft = Fixed([7, 8])
    store = ReplyProposer(ReplyIndex.from_records(RECORDS), min_n=2, min_path=0.6)
    h = HybridProposer(NgramProposer(min_n=2), draft, draft_k=2, store=store)
    assert h.propose([1, 2, 40, 1, 2], 4).tokens == [40, 1]  # lookup first
    assert h.propose([90, 91], 4).tokens == [1, 2, 3]  # then the store
    assert (h.used_ngram, h.used_store, draft.calls) == (1, 1, 0)
    assert h.propose([33, 34], 4).tokens == [7, 8]  # neither has a match: the model
    assert draft.calls == 1
    h.reset()
    assert (h.used_ngram, h.used_store) == (0, 0)


def test_a_sure_store_drafts_in_place_of_a_short_lookup_match() -> None:
    # The context repeats "90 91" (a 2-token lookup match proposing "5 90"); the
    # store has seen "90 91" 4 times, 3 of them going on with 1 (share 0.75).
    ctx = [90, 91, 5, 90, 91]
    store = ReplyProposer(ReplyIndex.from_records(RECORDS), min_n=2, min_path=0.55)

    def hybrid(order: int, share: float) -> HybridProposer:
        return HybridProposer(
            NgramProposer(min_n=2), Fixed([7]), store=store,
            store_first_order=order, store_first_share=share,
        )  # fmt: skip

    h = hybrid(3, 0.7)
    assert h.propose(ctx, 4).tokens == [1, 2, 3]  # 0.75 ≥ 0.7: the store
    assert (h.used_store, h.used_ngram) == (1, 0)
    assert store.last_shares == [0.75, 1.0, 1.0]
    assert hybrid(3, 0.8).propose(ctx, 4).tokens == [5, 90]  # not sure enough: lookup
    assert hybrid(1, 0.7).propose(ctx, 4).tokens == [5, 90]  # a 2-token match is kept
    assert hybrid(0, 0.0).propose(ctx, 4).tokens == [5, 90]  # off by default
    long_ctx = [8, 2, 3, 4, 9, 8, 2, 3, 4]  # a 4-token lookup match: never yields at 3
    assert hybrid(3, 0.0).propose(long_ctx, 4).tokens == [9, 8, 2, 3]
