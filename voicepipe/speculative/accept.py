"""Acceptance rules for speculative decoding (docs/DESIGN.md §6), as pure functions.

Shared by the text LLM and the audio-token TTS. Every rule verifies K draft
tokens against the target in one go, vectorised over the K positions, and
takes its random numbers as arguments so tests can be exact.

Shapes (V = vocabulary size, K = number of drafts):

    draft   (K,)       int     draft tokens x_0 … x_{K-1}
    p       (K, V)     float   draft distributions the drafts were sampled from
                               (None: a deterministic drafter, p = one-hot(x))
    q       (K+1, V)   float   target distributions; row i scores position i,
                               row K is the target's next distribution after all
                               K drafts (the "bonus" row)
    u       (K,)       float   uniforms in [0, 1) for the accept tests
    u_next  float              uniform in [0, 1) for the residual / bonus sample

All rules return an ``Accept``: how many drafts were accepted (a prefix), the
token that follows them (the correction at the first rejection, or the bonus
token when all K pass), and per-position flags (``accepted[i]`` true for
i < n_accepted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# A distance between codebook entries: either a (V, V) matrix or a vectorised
# function of two int arrays of equal shape returning their distances.
Distance = np.ndarray | Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Accept:
    n_accepted: int
    next_token: int
    accepted: np.ndarray  # (K,) bool, a prefix of True

    def emitted(self, draft: np.ndarray) -> list[int]:
        """The tokens this step adds to the sequence: accepted drafts + next token."""
        return [int(t) for t in np.asarray(draft)[: self.n_accepted]] + [self.next_token]


def sample_from(dist: np.ndarray, u: float) -> int:
    """Inverse-CDF sample of an unnormalised, non-negative (V,) vector with uniform u."""
    c = np.cumsum(np.asarray(dist, dtype=np.float64))
    total = c[-1]
    if not total > 0:
        raise ValueError("cannot sample from an all-zero distribution")
    # side="right" skips zero-probability entries even at u = 0.
    idx = int(np.searchsorted(c, u * total, side="right"))
    return min(idx, int(c.shape[0]) - 1)


def _first_false(ok: np.ndarray) -> int:
    """Length of the leading run of True in a (K,) bool array."""
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if bad.size else int(ok.shape[0])


def _prefix(n: int, k: int) -> np.ndarray:
    return np.arange(k) < n


def _check(draft: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, int]:
    draft = np.asarray(draft, dtype=np.int64).reshape(-1)
    k = draft.shape[0]
    if q.ndim != 2 or q.shape[0] != k + 1:
        raise ValueError(f"q must be (K+1, V) = ({k + 1}, V), got {q.shape}")
    return draft, k


def relaxed(
    draft: np.ndarray,
    p: np.ndarray | None,
    q: np.ndarray,
    u: np.ndarray,
    u_next: float,
    beta: float,
) -> Accept:
    """Accept x_i while u_i < min(1, q_i(x_i)/p_i(x_i)) + beta; residual resample on rejection.

    beta = 0 is the exact rule (output distributed exactly as the target);
    beta >= 1 accepts every draft. At the first rejection n the next token is
    drawn from norm(max(0, q_n - p_n)) with u_next; if all K pass it is drawn
    from q_K.
    """
    q = np.asarray(q, dtype=np.float64)
    draft, k = _check(draft, q)
    rows = np.arange(k)
    qx = q[rows, draft]
    if p is None:
        px = np.ones(k)
    else:
        p = np.asarray(p, dtype=np.float64)
        px = p[rows, draft]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(px > 0, qx / np.where(px > 0, px, 1.0), np.inf)
    ok = np.asarray(u, dtype=np.float64)[:k] < np.minimum(1.0, ratio) + beta
    n = _first_false(ok)
    if n == k:
        return Accept(n, sample_from(q[k], u_next), _prefix(n, k))
    if p is None:
        residual = q[n].copy()
        residual[draft[n]] = 0.0
    else:
        residual = np.maximum(0.0, q[n] - p[n])
    if not residual.sum() > 0:  # q == p up to rounding: the residual is undefined, use q
        residual = q[n]
    return Accept(n, sample_from(residual, u_next), _prefix(n, k))


def exact(
    draft: np.ndarray, p: np.ndarray | None, q: np.ndarray, u: np.ndarray, u_next: float
) -> Accept:
    """Leviathan et al. / Chen et al. speculative sampling: output ~ target exactly."""
    return relaxed(draft, p, q, u, u_next, beta=0.0)


def greedy(draft: np.ndarray, q: np.ndarray, argmax: np.ndarray | None = None) -> Accept:
    """Accept while x_i == argmax q_i; the next token is argmax of the first failing row.

    q may be probabilities or logits (only the argmax matters); argmax, when
    the target already found it (``Scores.best``), saves reading q. Output is
    token-identical to greedy decoding of the target.
    """
    q = np.asarray(q)
    draft, k = _check(draft, q)
    if argmax is not None:
        # Plain Python over K + 1 ints: each numpy call costs ~10 µs right after a
        # target pass has swept the caches, and this runs once per pass.
        d, b = draft.tolist(), np.asarray(argmax).tolist()
        n = 0
        while n < k and d[n] == b[n]:
            n += 1
        return Accept(n, int(b[n]), _prefix(n, k))
    best = q.argmax(axis=-1)  # (K+1,)
    n = _first_false(draft == best[:k])
    return Accept(n, int(best[n]), _prefix(n, k))


@dataclass(frozen=True)
class TreeAccept:
    """What greedy verification of a chain with sibling leaves keeps."""

    tokens: list[int]  # accepted drafts: a prefix of the chain, maybe then a sibling
    next_token: int
    sibling_row: int  # the verify row of the accepted sibling, -1 for none


def greedy_siblings(
    draft: np.ndarray,
    siblings: Sequence[tuple[int, int]],
    q: np.ndarray,
    argmax: np.ndarray | None = None,
) -> TreeAccept:
    """``greedy`` over a chain of K drafts with sibling leaves (a draft tree).

    siblings[j] = (d, x): x is an alternative to draft[d], fed as verify row
    K + 1 + j after the chain's K + 1 rows, following row d (the token before
    draft[d]). Where the chain first fails (at d), the sibling that is q_d's
    argmax is accepted and its own row gives the next token; greedy decoding
    would have emitted exactly those tokens, since each row scores its path.
    argmax: as for ``greedy``.
    """
    q = np.asarray(q)
    best = q.argmax(axis=-1) if argmax is None else argmax
    k = len(draft)
    chain = greedy(draft, q[: k + 1], best[: k + 1])
    n = chain.n_accepted
    kept = np.asarray(draft)[:n].tolist()
    for j, (d, x) in enumerate(siblings):
        if d == n and x == chain.next_token:  # never draft[n]: it just failed
            row = k + 1 + j
            return TreeAccept([*kept, int(x)], int(best[row]), row)
    return TreeAccept(kept, chain.next_token, -1)


def top_k(draft: np.ndarray, q: np.ndarray, k: int, u_next: float | None = None) -> Accept:
    """Accept x_i while it is among the k most likely tokens of q_i (k = 1: greedy).

    The next token is the argmax of q_n (u_next None) or drawn from q_n with
    u_next (q must then be probabilities).
    """
    q = np.asarray(q, dtype=np.float64)
    draft, kk = _check(draft, q)
    if k < 1:
        raise ValueError("top-k tolerance needs k >= 1")
    rows = np.arange(kk)
    qx = q[rows, draft][:, None]  # (K, 1)
    # Rank of x_i = how many tokens are strictly more likely; ties count in x's favour.
    rank = (q[:kk] > qx).sum(axis=-1)
    n = _first_false(rank < k)
    nxt = int(q[n].argmax()) if u_next is None else sample_from(q[n], u_next)
    return Accept(n, nxt, _prefix(n, kk))


def acoustic(
    draft: np.ndarray,
    q: np.ndarray,
    distance: Distance,
    beta: float,
    u_target: np.ndarray | None = None,
) -> Accept:
    """Accept x_i while dist(x_i, t_i) <= beta, t_i being the target's own choice at i.

    t_i is argmax q_i (u_target None) or drawn from q_i with u_target[i]
    (u_target of shape (K+1,)). ``distance`` is a (V, V) matrix or a
    vectorised function, e.g. Euclidean distance of codec codebook vectors.
    At the first rejection n the next token is t_n; if all pass, t_K.
    beta = 0 with a proper metric is greedy verification.
    """
    q = np.asarray(q, dtype=np.float64)
    draft, k = _check(draft, q)
    if u_target is None:
        target = q.argmax(axis=-1)
    else:
        target = np.array([sample_from(q[i], float(u_target[i])) for i in range(k + 1)])
    if callable(distance):
        d = np.asarray(distance(draft, target[:k]), dtype=np.float64)
    else:
        d = np.asarray(distance)[draft, target[:k]]
    n = _first_false(d <= beta)
    return Accept(n, int(target[n]), _prefix(n, k))


def codebook_distance(codebook: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Euclidean distance between entries of a (V, D) codebook, for ``acoustic``."""
    cb = np.asarray(codebook, dtype=np.float64)

    def dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.linalg.norm(cb[a] - cb[b], axis=-1)
        return out

    return dist


RULES = ("greedy", "exact", "relaxed", "topk", "acoustic")
