"""The batch scheduler's policy (core/batching.py): who runs, and the speculation cap."""

from __future__ import annotations

from voicepipe.core.batching import BatchPolicy, expected_tokens


def _measured(policy: BatchPolicy, base: float, per_row: float, accept: float) -> None:
    """Steps whose cost is base + per_row · rows, and drafts accepted at ``accept``."""
    for rows in (1, 2, 4, 8, 16, 3, 6, 12, 5, 10):
        policy.observe_step(rows, base + per_row * rows)
    for _ in range(200):  # a step of 4 drafts keeps a prefix of 4·accept on average
        n = round(4 * accept)
        policy.observe_drafts(4, n)


def test_sessions_join_and_leave_between_steps() -> None:
    p = BatchPolicy(prefills=2)
    p.join_decode(1)
    for sid in (2, 3, 4):
        p.join_prefill(sid)
    a = p.plan()
    assert a.decode == [1] and a.prefill == [2, 3]  # two prompts a chunk each, oldest first
    b = p.plan()
    assert b.prefill == [4, 2]  # round robin
    p.prefill_done(2)
    p.join_decode(2)
    p.leave(1)
    c = p.plan()
    assert c.decode == [2] and sorted(c.prefill) == [3, 4]
    for sid in (2, 3, 4):
        p.leave(sid)
    assert p.idle and p.plan().prefill == []


def test_no_cap_until_measured_then_speculation_shrinks_as_the_batch_grows() -> None:
    p = BatchPolicy(k_max=8)
    assert p.k_cap(1) is None  # nothing measured: each session's own controller decides
    # A pass costs its weight read (10 ms) plus 1 ms per row; drafts are accepted often.
    _measured(p, 0.010, 0.001, 0.75)
    caps = [p.k_cap(b) for b in (1, 2, 4, 8, 16)]
    assert all(c is not None for c in caps)
    assert caps[0] >= 3  # alone, the weight read dominates: speculate
    assert caps == sorted(caps, reverse=True) and caps[-1] < caps[0]


def test_speculation_off_when_a_draft_row_costs_more_than_it_returns() -> None:
    p = BatchPolicy(k_max=8)
    # Rows cost as much as the weight read, and drafts are rarely accepted.
    _measured(p, 0.005, 0.005, 0.25)
    assert p.k_cap(4) == 0
    assert BatchPolicy(k_max=0).k_cap(1) == 0  # speculation off by setting


def test_expected_tokens() -> None:
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert abs(expected_tokens(0.5, 2) - 1.75) < 1e-12
