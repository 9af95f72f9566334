"""spec.replay: policies replayed over fixed proposals, against hand-counted passes."""

from __future__ import annotations

import pytest

from voicepipe.speculative import replay as R
from voicepipe.speculative.adaptive import AdaptiveK

FLAT = R.Costs([1.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # every pass costs one decode


def fixed(k: int):
    return lambda: AdaptiveK(k, k_max=k, adaptive=False)


def test_perfect_lookup_emits_k_plus_one_per_pass() -> None:
    # A 20-token reply quoted from the prompt: a 5-gram match confirming 16 tokens everywhere.
    sites = [R.Site(ngram_order=5, ngram_len=16, ngram_ok=16) for _ in range(19)]
    r = R.replay(sites, R.ngram(), FLAT, fixed(4))
    # Passes emit 5, 5, 5, then the last 4 tokens (K shrinks to what is left: 3 drafts + 1).
    assert (r.tokens, r.passes) == (19, 4)
    assert r.speedup == pytest.approx(19 / 4)
    # Capped by the match's order: a 2-gram match drafts 2 even when 16 would be right.
    sites2 = [R.Site(ngram_order=2, ngram_len=16, ngram_ok=16) for _ in range(19)]
    assert R.replay(sites2, R.ngram(), FLAT, fixed(4)).passes == 7  # 3 tokens per pass
    assert R.replay(sites2, R.ngram(cap_by_order=False), FLAT, fixed(4)).passes == 4
    assert R.replay(sites2, R.ngram(min_n=3), FLAT, fixed(4)).passes == 19  # no proposal


def test_pass_cost_counts_rows_and_draft_steps() -> None:
    costs = R.Costs([1.0, 1.5, 2.0], draft_step=0.25)
    assert costs.verify(5) == pytest.approx(3.0)  # extrapolated linearly past the measured rows
    # The draft is never right: every pass drafts 2 guesses (sure of them) and emits 1 token.
    sites = [R.Site(eagle_confs=(0.9, 0.9, 0.9), eagle_ok=0) for _ in range(6)]
    r = R.replay(sites, R.eagle(k_max=2), costs, fixed(2))
    # 6 tokens, one per pass; K shrinks to what is left: 4 passes of 3 rows + 2 steps,
    # one of 2 rows + 1 step, one of 1 row.
    assert r.passes == 6
    assert r.cost == pytest.approx(4 * (2.0 + 0.5) + (1.5 + 0.25) + 1.0)
    assert r.speedup < 1


def test_eagle_drafts_on_while_its_path_probability_holds() -> None:
    s = R.Site(eagle_confs=(0.9, 0.5, 0.9, 0.9), eagle_ok=4)
    assert R.eagle(k_max=4, min_path=0.0)(s, 4) == R.Pick(4, 4, 4)
    assert R.eagle(k_max=4, min_path=0.5)(s, 4) == R.Pick(2, 2, 2)  # 0.9 ≥ 0.5, then 0.45 < 0.5
    assert R.eagle(k_max=4, min_path=0.95)(s, 4) == R.Pick(1, 1, 1)  # always one guess
    assert R.eagle(k_max=4)(R.Site(eagle_confs=(0.9, 0.9), eagle_ok=1), 4) == R.Pick(2, 1, 2)


def test_hybrid_takes_lookup_only_for_long_matches() -> None:
    h = R.hybrid(R.ngram(), R.eagle(k_max=2), min_order=3)
    long = R.Site(ngram_order=4, ngram_len=8, ngram_ok=8, eagle_confs=(0.9, 0.9), eagle_ok=0)
    short = R.Site(ngram_order=2, ngram_len=8, ngram_ok=8, eagle_confs=(0.9, 0.9), eagle_ok=1)
    assert h(long, 6) == R.Pick(4, 4, 0)  # lookup, no draft steps
    assert h(short, 6) == R.Pick(2, 1, 2)  # the draft


def test_the_store_drafts_between_lookup_and_the_draft_while_its_path_holds() -> None:
    store = R.store(min_n=2, min_path=0.6)
    s = R.Site(store_order=3, store_shares=(0.9, 0.8, 0.5), store_ok=1, eagle_confs=(0.9,))
    assert store(s, 6) == R.Pick(2, 1, 0)  # 0.9 · 0.8 = 0.72 ≥ 0.6, then 0.36 < 0.6; no steps
    assert store(s, 1) == R.Pick(1, 1, 0)  # capped by K
    assert store(R.Site(store_order=1, store_shares=(1.0,), store_ok=1), 6).drafted == 0
    assert store(R.Site(store_order=2, store_shares=(0.5,), store_ok=1), 6).drafted == 0
    h = R.hybrid(R.ngram(), R.eagle(k_max=2), min_order=2, replies=store)
    assert h(R.Site(ngram_order=2, ngram_len=4, ngram_ok=4, store_order=3,
                    store_shares=(1.0,), store_ok=1), 6) == R.Pick(2, 2, 0)  # fmt: skip
    assert h(s, 6) == R.Pick(2, 1, 0)  # no lookup match: the store
    # Nothing from the store: the draft.
    assert h(R.Site(eagle_confs=(0.9, 0.9), eagle_ok=1), 6) == R.Pick(2, 1, 2)
    # A short lookup match yields to a sure store (first share ≥ 0.8), as spec.hybrid does.
    both = R.Site(ngram_order=2, ngram_len=4, ngram_ok=0, store_order=3,
                  store_shares=(0.9, 0.9), store_ok=2)  # fmt: skip
    first = R.hybrid(R.ngram(), R.eagle(k_max=2), 2, store, store_first_order=3,
                     store_first_share=0.8)  # fmt: skip
    assert first(both, 6) == R.Pick(2, 2, 0)
    assert h(both, 6) == R.Pick(2, 0, 0)  # off by default: lookup
    unsure = R.Site(ngram_order=3, ngram_len=4, ngram_ok=3, store_order=3,
                    store_shares=(0.7,), store_ok=1)  # fmt: skip
    assert first(unsure, 6) == R.Pick(3, 3, 0)
    longer = R.Site(ngram_order=4, ngram_len=4, ngram_ok=4, store_order=3,
                    store_shares=(1.0,), store_ok=1)  # fmt: skip
    assert first(longer, 6) == R.Pick(4, 4, 0)


def test_first_guess_accuracy_by_order_and_confidence() -> None:
    sites = [
        R.Site(ngram_order=1, ngram_len=3, ngram_ok=0, eagle_confs=(0.05,), eagle_ok=0),
        R.Site(ngram_order=1, ngram_len=3, ngram_ok=2, eagle_confs=(0.9,), eagle_ok=1),
        R.Site(ngram_order=7, ngram_len=8, ngram_ok=8, eagle_confs=(0.95,), eagle_ok=1),
        R.Site(eagle_confs=(0.5,), eagle_ok=0, eagle_alt_ok=2),  # no lookup match
        R.Site(store_order=2, store_shares=(0.9,), store_ok=1),
        R.Site(store_order=4, store_shares=(0.3, 1.0), store_ok=0),
        R.Site(store_order=1, store_shares=(0.9,), store_ok=1),  # too short a match: not counted
    ]
    acc = R.first_guess_accuracy(sites)
    assert acc["ngram_by_order"]["1"] == [2, 0.5]
    assert acc["ngram_by_order"]["5"] == [1, 1.0]  # orders of 5 and more together
    assert acc["ngram_by_order"]["3"] == [0, 0.0]
    assert acc["eagle_by_confidence"] == {
        "<0.1": [1, 0.0],
        "0.1-0.4": [0, 0.0],
        "0.4-0.8": [1, 0.0],
        ">=0.8": [2, 1.0],
    }
    # Two first guesses were wrong: the third likeliest held once, the second never.
    assert acc["eagle_runner_up_when_wrong"] == [2, 0.0, 0.5]
    assert acc["store_by_share"] == {
        "<0.1": [0, 0.0],
        "0.1-0.4": [1, 0.0],
        "0.4-0.8": [0, 0.0],
        ">=0.8": [1, 1.0],
    }


def test_tree_adds_a_row_per_likely_runner_up_and_takes_it_where_the_guesses_fail() -> None:
    alts = ((0.05, 0.01), (0.3, 0.2), (0.1, 0.05))  # per guess: the 2nd and 3rd likeliest
    s = R.Site(eagle_confs=(0.9, 0.5, 0.9), eagle_ok=1, eagle_alt_confs=alts, eagle_alt_ok=2)
    # Chain of 3 (paths 1, 0.9, 0.45 before each guess); runner-ups whose path ≥ 0.1:
    # at guess 1, 0.9·0.3 and 0.9·0.2; none at guess 0 (0.05) or 2 (0.045). Guess 1
    # failed and its third likeliest held.
    assert R.eagle_tree(3, 0.4, 0.1)(s, 3) == R.Pick(3, 2, 3, 2)
    assert R.eagle_tree(3, 0.4, 0.1, alts=1)(s, 3) == R.Pick(3, 1, 3, 1)  # 2nd only: missed
    assert R.eagle_tree(3, 0.4, 0.01)(s, 3) == R.Pick(3, 2, 3, 6)
    miss = R.Site(eagle_confs=(0.9, 0.5, 0.9), eagle_ok=0, eagle_alt_confs=alts, eagle_alt_ok=1)
    assert R.eagle_tree(3, 0.4, 0.1)(miss, 3) == R.Pick(3, 0, 3, 2)  # no sibling at guess 0
    costs = R.Costs([1.0, 1.1, 1.2, 1.3, 1.4, 1.5], draft_step=0.1)
    r = R.replay([s, s, s, s], R.eagle_tree(3, 0.4, 0.1), costs, fixed(3))
    # Pass 1 emits 3 (two guesses, a sibling) over 6 rows; then 1 site is left: 1 row.
    assert (r.passes, r.cost) == (2, pytest.approx(1.5 + 0.3 + 1.0))


def test_oracle_drafts_the_best_source_exactly_as_far_as_the_reply_confirms() -> None:
    sites = [
        R.Site(ngram_order=3, ngram_len=8, ngram_ok=2, eagle_confs=(0.9, 0.9, 0.9), eagle_ok=3),
        R.Site(ngram_order=3, ngram_len=8, ngram_ok=4, eagle_confs=(0.9, 0.9), eagle_ok=1),
        R.Site(eagle_confs=(0.1,), eagle_ok=0),
        R.Site(store_order=4, store_shares=(1.0, 1.0), store_ok=2, eagle_confs=(0.5,), eagle_ok=1),
    ]
    pick = R.oracle()
    assert pick(sites[0], 8) == R.Pick(3, 3, 3)  # the draft's 3 right guesses beat lookup's 2
    assert pick(sites[1], 8) == R.Pick(4, 4, 0)  # lookup confirms further, for no step
    assert pick(sites[1], 2) == R.Pick(2, 2, 0)  # K caps it; a tie goes to the free source
    assert pick(sites[2], 8) == R.Pick(0, 0, 0)  # nothing right: a plain pass
    assert pick(sites[3], 8) == R.Pick(2, 2, 0)
    assert R.oracle(lookup=False, replies=False)(sites[1], 8) == R.Pick(1, 1, 1)
    # No rule over the same sites does better than it.
    costs = R.Costs([1.0, 1.1, 1.3, 1.5], draft_step=0.05)
    best = R.replay(sites * 5, pick, costs, fixed(8)).speedup
    for rule in (R.ngram(), R.eagle(4), R.hybrid(R.ngram(), R.eagle(4), 3)):
        assert R.replay(sites * 5, rule, costs, fixed(4)).speedup <= best


def test_chain_speedup_and_the_agreement_a_goal_needs() -> None:
    costs = R.Costs([1.0, 1.1, 1.3, 1.5], draft_step=0.05)
    # α = 0.5, K = 1: 1.5 tokens for 1.1 + 0.05 of a pass.
    assert R.chain_speedup(0.5, costs, 1) == pytest.approx(1.5 / 1.15)
    assert R.chain_speedup(1.0, costs, 3) == pytest.approx(4 / 1.65)
    a = R.agreement_for(1.5, costs, k_max=4)
    assert max(R.chain_speedup(a, costs, k) for k in range(1, 5)) == pytest.approx(1.5, abs=1e-3)
    assert R.agreement_for(1.5, costs, k_max=4) < R.agreement_for(1.8, costs, k_max=4)
    # Unreachable even when every guess holds: 1.0. Free rows make anything reachable.
    assert R.agreement_for(10.0, costs, k_max=4) == 1.0
    assert R.agreement_for(2.0, R.Costs([1.0] * 8), k_max=8) == pytest.approx(0.5, abs=0.01)
