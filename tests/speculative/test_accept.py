"""Acceptance rules: exact outcomes for given uniforms, and statistical fidelity."""

from __future__ import annotations

import math

import numpy as np
import pytest

from voicepipe.speculative import accept as A


def chi2_critical(dof: int, z: float = 3.09) -> float:
    """Wilson–Hilferty approximation of the chi-square quantile (z = 3.09: p = 0.999)."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


def chi2(counts: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    n = counts.sum()
    keep = probs > 0
    assert counts[~keep].sum() == 0, "a token of target probability 0 was emitted"
    exp = probs[keep] * n
    return float(((counts[keep] - exp) ** 2 / exp).sum()), int(keep.sum() - 1)


# ---------------------------------------------------------------- exact outcomes


def test_sample_from_inverse_cdf() -> None:
    d = np.array([0.0, 0.2, 0.0, 0.8])
    assert A.sample_from(d, 0.0) == 1  # zero-probability entries never come out
    assert A.sample_from(d, 0.19) == 1
    assert A.sample_from(d, 0.21) == 3
    assert A.sample_from(d, 0.999999) == 3
    assert A.sample_from(d * 5, 0.21) == 3  # unnormalised is fine
    with pytest.raises(ValueError):
        A.sample_from(np.zeros(3), 0.5)


def test_exact_accept_reject_residual() -> None:
    p = np.array([[0.5, 0.5, 0.0], [0.2, 0.2, 0.6]])
    q = np.array([[0.25, 0.75, 0.0], [0.1, 0.1, 0.8], [0.0, 0.0, 1.0]])
    draft = np.array([0, 2])
    # q/p at position 0 = 0.5: u=0.4 accepts, then position 1 has q/p > 1: always accepted.
    r = A.exact(draft, p, q, np.array([0.4, 0.99]), 0.3)
    assert (r.n_accepted, r.next_token) == (2, 2)  # bonus from q[2]
    assert r.accepted.tolist() == [True, True]
    assert r.emitted(draft) == [0, 2, 2]
    # u=0.6 rejects at 0; residual max(0, q-p) = [0, .25, 0] → token 1 whatever u_next.
    for un in (0.0, 0.5, 0.999):
        r = A.exact(draft, p, q, np.array([0.6, 0.0]), un)
        assert (r.n_accepted, r.next_token) == (0, 1)
        assert r.accepted.tolist() == [False, False]


def test_exact_rejects_at_second_position() -> None:
    p = np.array([[0.0, 1.0], [0.0, 1.0]])
    q = np.array([[0.0, 1.0], [0.7, 0.3], [0.5, 0.5]])
    r = A.exact(np.array([1, 1]), p, q, np.array([0.9, 0.31]), 0.5)
    assert (r.n_accepted, r.next_token) == (1, 0)
    assert r.accepted.tolist() == [True, False]
    r = A.exact(np.array([1, 1]), p, q, np.array([0.9, 0.29]), 0.5)
    assert r.n_accepted == 2


def test_deterministic_drafter_p_none() -> None:
    q = np.array([[0.3, 0.7], [0.5, 0.5]])
    assert A.exact(np.array([1]), None, q, np.array([0.69]), 0.0).n_accepted == 1
    r = A.exact(np.array([1]), None, q, np.array([0.71]), 0.99)
    assert (r.n_accepted, r.next_token) == (0, 0)  # residual is q without the draft


def test_relaxed_beta() -> None:
    p = np.array([[0.5, 0.5]])
    q = np.array([[0.1, 0.9], [0.5, 0.5]])
    d = np.array([0])
    assert A.relaxed(d, p, q, np.array([0.25]), 0.0, beta=0.0).n_accepted == 0
    assert A.relaxed(d, p, q, np.array([0.25]), 0.0, beta=0.2).n_accepted == 1
    assert A.relaxed(d, p, q, np.array([0.999]), 0.0, beta=1.0).n_accepted == 1
    # A draft the target gives zero probability is still accepted at beta >= 1.
    q0 = np.array([[0.0, 1.0], [0.5, 0.5]])
    assert A.relaxed(d, p, q0, np.array([0.5]), 0.0, beta=1.0).n_accepted == 1
    r = A.relaxed(d, p, q0, np.array([0.5]), 0.0, beta=0.4)
    assert (r.n_accepted, r.next_token) == (0, 1)


def test_greedy_rule() -> None:
    logits = np.array([[1.0, 5.0, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 9.0], [0.0, 2.0, 1.0]])
    r = A.greedy(np.array([1, 0, 2]), logits)
    assert (r.n_accepted, r.next_token) == (3, 1)
    r = A.greedy(np.array([1, 2, 2]), logits)
    assert (r.n_accepted, r.next_token) == (1, 0)
    assert r.accepted.tolist() == [True, False, False]
    r = A.greedy(np.array([0, 0, 2]), logits)
    assert (r.n_accepted, r.next_token) == (0, 1)
    with pytest.raises(ValueError):
        A.greedy(np.array([0, 0]), logits)
    # With the target's argmax given (Scores.best), the same answers without reading q.
    best = logits.argmax(axis=-1)
    for d in ([1, 0, 2], [1, 2, 2], [0, 0, 2], [1, 0, 0]):
        a, b = A.greedy(np.array(d), logits), A.greedy(np.array(d), logits, best)
        assert (a.n_accepted, a.next_token) == (b.n_accepted, b.next_token), d
        assert a.accepted.tolist() == b.accepted.tolist()


def test_top_k_rule() -> None:
    q = np.array([[0.5, 0.3, 0.15, 0.05], [0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]])
    draft = np.array([2, 1])
    assert A.top_k(draft, q, 1).n_accepted == 0
    r = A.top_k(draft, q, 3)
    assert (r.n_accepted, r.next_token) == (2, 0)  # bonus argmax; ties → first index
    r = A.top_k(draft, q, 2)
    assert (r.n_accepted, r.next_token) == (0, 0)
    r = A.top_k(np.array([0, 1]), q, 2)
    assert (r.n_accepted, r.next_token) == (1, 3)
    assert A.top_k(np.array([0, 1]), q, 2, u_next=0.05).next_token == 0  # sampled from q[1]
    # k = 1 coincides with greedy.
    rng = np.random.default_rng(1)
    for _ in range(50):
        qq = rng.dirichlet(np.ones(6), size=4)
        dd = rng.integers(0, 6, size=3)
        a, b = A.top_k(dd, qq, 1), A.greedy(dd, qq)
        assert (a.n_accepted, a.next_token) == (b.n_accepted, b.next_token)


def test_acoustic_rule_matrix_and_function() -> None:
    codebook = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.0, 5.2]])
    dist = A.codebook_distance(codebook)
    mat = np.linalg.norm(codebook[:, None] - codebook[None], axis=-1)
    q = np.array([[0.1, 0.8, 0.05, 0.05], [0.0, 0.0, 0.9, 0.1], [0.0, 0.0, 0.2, 0.8]])
    for d in (dist, mat):
        r = A.acoustic(np.array([0, 3]), q, d, beta=0.25)  # 0~1 (0.1), 3~2 (0.2)
        assert (r.n_accepted, r.next_token) == (2, 3)
        r = A.acoustic(np.array([0, 3]), q, d, beta=0.15)
        assert (r.n_accepted, r.next_token) == (1, 2)
        r = A.acoustic(np.array([2, 3]), q, d, beta=1.0)
        assert (r.n_accepted, r.next_token) == (0, 1)
    # beta = 0 is greedy verification.
    assert A.acoustic(np.array([1, 2]), q, mat, beta=0.0).n_accepted == 2
    # Target choices drawn with given uniforms: u=0.05 on row 0 picks token 0 itself.
    r = A.acoustic(np.array([0, 2]), q, mat, 0.0, u_target=np.array([0.05, 0.5, 0.5]))
    assert (r.n_accepted, r.next_token) == (2, 3)


# ---------------------------------------------------------------- statistics


def _markov_generate(
    rule, P: np.ndarray, Q: np.ndarray, k: int, n_tokens: int, rng: np.random.Generator
) -> list[int]:
    """Generate n_tokens from start state 0 with speculative steps over Markov chains."""
    seq = [0]
    while len(seq) - 1 < n_tokens:
        prev = seq[-1]
        draft, p_rows = [], []
        for _ in range(k):
            p_rows.append(P[prev])
            prev = int(rng.choice(P.shape[0], p=P[prev]))
            draft.append(prev)
        ctx = [seq[-1]] + draft
        q = np.stack([Q[t] for t in ctx])  # (K+1, V): q_i conditioned on the drafted prefix
        r = rule(np.array(draft), np.stack(p_rows), q, rng.random(k), float(rng.random()))
        seq += r.emitted(np.array(draft))
    return seq[1 : n_tokens + 1]


def _pair_counts(rule, P, Q, k, n, seed) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    v = Q.shape[0]
    counts = np.zeros((v, v))
    for _ in range(n):
        a, b = _markov_generate(rule, P, Q, k, 2, rng)
        counts[a, b] += 1
    target = Q[0][:, None] * Q  # joint law of the first two target tokens
    return counts.ravel(), target.ravel()


def _chains(v: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    Q = rng.dirichlet(np.ones(v) * 0.7, size=v)
    P = 0.5 * rng.dirichlet(np.ones(v), size=v) + 0.5 * Q  # a draft that is close, not equal
    return P, Q


def test_exact_rule_reproduces_target_joint_distribution() -> None:
    P, Q = _chains()
    counts, target = _pair_counts(A.exact, P, Q, k=3, n=8000, seed=123)
    stat, dof = chi2(counts, target)
    assert stat < chi2_critical(dof), (stat, dof)


def test_chi2_detects_a_biased_rule() -> None:
    """The same test fails for the relaxed rule: it is not distribution-preserving."""
    P, Q = _chains()
    Pb = np.roll(Q, 1, axis=1)  # a poor draft, so beta changes a lot
    rule = lambda d, p, q, u, un: A.relaxed(d, p, q, u, un, beta=0.5)  # noqa: E731
    counts, target = _pair_counts(rule, Pb, Q, k=3, n=8000, seed=123)
    stat, dof = chi2(counts, target)
    assert stat > chi2_critical(dof), (stat, dof)


def test_exact_rule_single_position_matches_target() -> None:
    """First emitted token ~ q for a deterministic (one-hot) drafter too."""
    rng = np.random.default_rng(7)
    q = rng.dirichlet(np.ones(8), size=2)
    counts = np.zeros(8)
    for _ in range(20000):
        x = int(rng.integers(0, 8))  # draft chosen independently of q
        r = A.exact(np.array([x]), None, q, rng.random(1), float(rng.random()))
        counts[r.emitted(np.array([x]))[0]] += 1
    stat, dof = chi2(counts, q[0])
    assert stat < chi2_critical(dof), (stat, dof)


def test_greedy_siblings_takes_the_runner_up_where_the_chain_fails() -> None:
    # Rows 0..2 score the chain [5, 6]; rows 3 and 4 its siblings (0, 7) and (1, 8).
    q = np.zeros((5, 10))
    q[0, 5] = q[1, 8] = q[2, 1] = q[3, 2] = q[4, 9] = 1.0
    got = A.greedy_siblings(np.array([5, 6]), [(0, 7), (1, 8)], q)
    # 5 holds; row 1 wants 8, not 6: the sibling 8 (row 4) is taken, and row 4's pick follows.
    assert (got.tokens, got.next_token, got.sibling_row) == ([5, 8], 9, 4)
    q[1, 8], q[1, 3] = 0.0, 1.0  # row 1 wants 3: no sibling has it
    got = A.greedy_siblings(np.array([5, 6]), [(0, 7), (1, 8)], q)
    assert (got.tokens, got.next_token, got.sibling_row) == ([5], 3, -1)
    q[1, 3], q[1, 6] = 0.0, 1.0  # the whole chain holds: the bonus row, siblings unused
    got = A.greedy_siblings(np.array([5, 6]), [(0, 7), (1, 8)], q)
    assert (got.tokens, got.next_token, got.sibling_row) == ([5, 6], 1, -1)
