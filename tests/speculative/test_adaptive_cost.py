"""spec.adaptive: the draft length that maximizes tokens per unit of cost."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe.speculative.adaptive import CostAwareK


def _feed(ctl: CostAwareK, accept: list[float], steps: int, seed: int = 0) -> list[int]:
    """Run steps passes where position i is accepted with chance accept[i]; returns the Ks."""
    rng = np.random.default_rng(seed)
    ks = []
    for _ in range(steps):
        k = ctl.next_k()
        ks.append(k)
        n = 0
        while n < k and rng.random() < accept[min(n, len(accept) - 1)]:
            n += 1
        ctl.update(k, n)
    return ks


def test_rate_is_tokens_per_cost() -> None:
    c = CostAwareK(draft_cost=0.3, row_cost=0.1, k_max=3, prior=0.5)
    assert c.rate(1) == pytest.approx(1.5 / 1.4)
    assert c.rate(2) == pytest.approx(1.75 / 1.8)


def test_an_expensive_draft_drafts_one_token() -> None:
    # The Qwen 0.5B on the 1.5B: a drafted token costs 0.35 of a target step and
    # acceptance by position was 0.75, 0.48, 0.43.
    ks = _feed(CostAwareK(draft_cost=0.35, row_cost=0.07), [0.75, 0.48, 0.43], 400)
    assert set(ks[50:]) <= {0, 1}  # one draft, or a pause after a run of misses
    assert ks[50:].count(1) > 0.85 * len(ks[50:])


def test_a_cheap_accurate_draft_drafts_long() -> None:
    ks = _feed(CostAwareK(draft_cost=0.02, row_cost=0.05, k_max=6), [0.95], 300)
    assert np.mean(ks[50:]) > 5


def test_a_draft_that_cannot_pay_pauses_and_probes_again() -> None:
    c = CostAwareK(draft_cost=0.35, row_cost=0.07, cooldown=5)
    ks = _feed(c, [0.1], 200)
    assert ks.count(0) > 150  # mostly plain decoding
    assert any(k > 0 for k in ks[100:])  # but it keeps probing


def test_misses_only_count_positions_that_were_reached() -> None:
    c = CostAwareK(draft_cost=0.1, k_max=4, prior=0.6)
    c.update(4, 1)  # position 1 accepted, 2 missed, 3 and 4 never judged
    a = c.estimates()
    assert a[0] > 0.6 and a[1] < 0.6 and c.seen == [True, True, False, False]
    assert a[2] == a[3] == a[1]  # unjudged positions borrow the last judged estimate


def test_k_grows_on_copied_text_even_for_an_expensive_draft() -> None:
    # The 0.5B on grounded prompts: 0.99 of its guesses held at every position.
    ks = _feed(CostAwareK(draft_cost=0.35, row_cost=0.07, k_max=8), [0.99], 200)
    assert max(ks) == 8 and np.mean(ks[50:]) > 6
