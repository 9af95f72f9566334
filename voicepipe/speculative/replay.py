"""Exact replay of greedy speculative-decoding policies (no I/O, no model).

Greedy speculation emits the target's own greedy reply whatever the drafter
does, and a deterministic drafter's proposal at a position depends only on
the context, so at every position of that reply the proposal is fixed. A
``Site`` records, per position, what the drafter would propose there (what a
policy may look at) and how many of its tokens the reply confirms. Replaying
a policy over the sites gives exactly the verifying passes it would run; with
the measured cost of a pass over T rows and of a draft step (``Costs``), the
speedup follows without timing a single generation, so it does not depend on
the machine's load beyond that one cost curve. ``voicepipe bench replay``
builds the sites from real models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from voicepipe.speculative.adaptive import AdaptiveK


@dataclass(frozen=True)
class Site:
    """What drafters would propose after one position of the reply.

    ngram_order / ngram_len: prompt lookup's matched n-gram order (0: no match)
    and how many tokens it could propose; ngram_ok: how many of those the reply
    confirms. eagle_confs: the EAGLE draft's probability of each of its guesses
    (as many as traced); eagle_ok: how many of them the reply confirms.
    eagle_alt_confs: at each guess, its probabilities of the runner-ups (the
    next likeliest tokens: a tree's siblings); eagle_alt_ok: which runner-up is
    the reply's token where the guesses first go wrong (at guess eagle_ok):
    1 the second likeliest, 2 the third, 0 none. store_order: the reply store's
    longest match (spec.replies; 0: none); store_shares: each token of its
    continuation's share of the occurrences that still agree (traced with no
    path threshold); store_ok: how many of those tokens the reply confirms.
    """

    ngram_order: int = 0
    ngram_len: int = 0
    ngram_ok: int = 0
    eagle_confs: tuple[float, ...] = ()
    eagle_ok: int = 0
    eagle_alt_confs: tuple[tuple[float, ...], ...] = ()
    eagle_alt_ok: int = 0
    store_order: int = 0
    store_shares: tuple[float, ...] = ()
    store_ok: int = 0


@dataclass(frozen=True)
class Costs:
    """rows[T-1]: a pass over T rows, in one-row decodes; draft_step likewise."""

    rows: Sequence[float]
    draft_step: float = 0.0

    def verify(self, t: int) -> float:
        r = self.rows
        if t <= len(r):
            return r[t - 1]
        slope = r[-1] - r[-2] if len(r) > 1 else 1.0
        return r[-1] + slope * (t - len(r))


class Pick(NamedTuple):
    """A drafter's choice at a site: tokens drafted along its deepest path, tokens
    the reply confirms, draft-model steps spent, and verify rows beyond the path
    (a tree's siblings)."""

    drafted: int
    ok: int
    steps: int
    extra_rows: int = 0


# A drafter's choice at a site, given the controller's K.
Choice = Callable[[Site, int], Pick]


def ngram(min_n: int = 1, cap_by_order: bool = True) -> Choice:
    """Prompt lookup as spec.ngram.NgramProposer proposes (capped by its match order)."""

    def choose(s: Site, k: int) -> Pick:
        if s.ngram_order < min_n:
            return Pick(0, 0, 0)
        n = min(k, s.ngram_len, s.ngram_order if cap_by_order else k)
        return Pick(n, min(n, s.ngram_ok), 0)

    return choose


def eagle(k_max: int, min_path: float = 0.0) -> Choice:
    """The EAGLE proposer: one guess, then more while its path probability is ≥ min_path."""

    def choose(s: Site, k: int) -> Pick:
        k = min(k, k_max, len(s.eagle_confs))
        if k <= 0:
            return Pick(0, 0, 0)
        n, path = 1, s.eagle_confs[0]
        while n < k and path >= min_path:
            path *= s.eagle_confs[n]
            n += 1
        return Pick(n, min(n, s.eagle_ok), n)

    return choose


def eagle_tree(k_max: int, min_path: float, alt_min: float, alts: int = 2) -> Choice:
    """eagle()'s guesses, plus at each guess up to ``alts`` runner-ups as sibling
    leaves (a verify row each, no draft step) where the draft's probability of
    reaching one (the guesses before it, then the runner-up) is ≥ alt_min."""
    chain = eagle(k_max, min_path)

    def choose(s: Site, k: int) -> Pick:
        p = chain(s, k)
        if not p.drafted or not s.eagle_alt_confs:
            return p
        extra, path, ok = 0, 1.0, p.ok
        for d in range(p.drafted):
            for rank, conf in enumerate(s.eagle_alt_confs[d][:alts], 1):
                if path * conf >= alt_min:
                    extra += 1
                    if d == p.ok < p.drafted and rank == s.eagle_alt_ok:
                        ok += 1  # the sibling where the guesses went wrong is right
            path *= s.eagle_confs[d]
        return Pick(p.drafted, ok, p.steps, extra)

    return choose


def store(min_n: int, min_path: float) -> Choice:
    """The reply store as spec.replies.ReplyProposer drafts: its continuation of a
    match of ≥ min_n tokens while the product of the shares stays ≥ min_path."""

    def choose(s: Site, k: int) -> Pick:
        if s.store_order < min_n:
            return Pick(0, 0, 0)
        n, path = 0, 1.0
        while n < min(k, len(s.store_shares)) and path * s.store_shares[n] >= min_path:
            path *= s.store_shares[n]
            n += 1
        return Pick(n, min(n, s.store_ok), 0)

    return choose


def hybrid(
    lookup: Choice,
    draft: Choice,
    min_order: int,
    replies: Choice | None = None,
    store_first_order: int = 0,
    store_first_share: float = 1.0,
) -> Choice:
    """Prompt lookup where its match has ≥ min_order tokens, else the reply store's
    proposal (``replies``, when given and it has one), else the draft; as
    spec.hybrid, a lookup match of ≤ store_first_order tokens yields to the store
    where ≥ store_first_share of its occurrences agree on its first token."""

    def choose(s: Site, k: int) -> Pick:
        if (
            replies is not None
            and min_order <= s.ngram_order <= store_first_order
            and s.store_shares
            and s.store_shares[0] >= store_first_share
        ):
            p = replies(s, k)
            if p.drafted:
                return p
        if s.ngram_order >= min_order:
            return lookup(s, k)
        if replies is not None:
            p = replies(s, k)
            if p.drafted:
                return p
        return draft(s, k)

    return choose


@dataclass
class Replay:
    tokens: int = 0  # tokens after the first (the plain decode's passes)
    passes: int = 0
    cost: float = 0.0  # in one-row decodes

    @property
    def speedup(self) -> float:
        return self.tokens / self.cost if self.cost else 1.0

    def add(self, o: Replay) -> None:
        self.tokens += o.tokens
        self.passes += o.passes
        self.cost += o.cost


def replay(
    sites: Sequence[Site], choose: Choice, costs: Costs, make_k: Callable[[], AdaptiveK]
) -> Replay:
    """The passes a policy runs over one reply (sites[i]: after the reply's first i+1 tokens)."""
    ctl = make_k()
    r = Replay(tokens=len(sites))
    i = 0
    while i < len(sites):
        k = min(ctl.next_k(), len(sites) - i - 1)
        p = choose(sites[i], k) if k > 0 else Pick(0, 0, 0)
        r.cost += costs.verify(p.drafted + p.extra_rows + 1) + p.steps * costs.draft_step
        r.passes += 1
        ctl.update(p.drafted, p.ok)
        i += p.ok + 1
    return r


CONF_EDGES = (0.1, 0.4, 0.8)  # draft-confidence buckets: <0.1, 0.1-0.4, 0.4-0.8, >=0.8


def first_guess_accuracy(sites: Sequence[Site]) -> dict[str, Any]:
    """How often each drafter's first guess is right: prompt lookup by the order of
    its match (1, 2, 3, 4, 5+), the EAGLE draft by its own probability of the guess
    (CONF_EDGES buckets). Each entry is [sites, share right]. And where the draft's
    first guess is wrong, how often its second or third likeliest token is right
    (what a tree's siblings can win): [sites, share second, share third]. The
    reply store's first token by the share of occurrences behind it (same buckets)."""

    def share(pairs: list[tuple[str, bool]], keys: list[str]) -> dict[str, list[float]]:
        out = {}
        for key in keys:
            hits = [ok for k, ok in pairs if k == key]
            out[key] = [len(hits), round(sum(hits) / len(hits), 3) if hits else 0.0]
        return out

    orders = [(str(min(s.ngram_order, 5)), s.ngram_ok > 0) for s in sites if s.ngram_order]
    labels = ["<0.1", "0.1-0.4", "0.4-0.8", ">=0.8"]
    confs = [
        (labels[sum(s.eagle_confs[0] >= e for e in CONF_EDGES)], s.eagle_ok > 0)
        for s in sites
        if s.eagle_confs
    ]
    wrong = [s.eagle_alt_ok for s in sites if s.eagle_confs and s.eagle_ok == 0]
    # The reply store where it has a ≥ 2-token match, by the share behind its first token.
    stored = [
        (labels[sum(s.store_shares[0] >= e for e in CONF_EDGES)], s.store_ok > 0)
        for s in sites
        if s.store_order >= 2 and s.store_shares
    ]

    def right(rank: int) -> float:
        return round(wrong.count(rank) / len(wrong), 3) if wrong else 0.0

    return {
        "ngram_by_order": share(orders, ["1", "2", "3", "4", "5"]),
        "eagle_by_confidence": share(confs, labels),
        "eagle_runner_up_when_wrong": [len(wrong), right(1), right(2)],
        "store_by_share": share(stored, labels),
    }


def oracle(*, lookup: bool = True, draft: bool = True, replies: bool = True) -> Choice:
    """The most any rule could get from these drafters: at each site, the source whose
    proposal the reply confirms furthest, drafted exactly that far, so no row is ever
    rejected. The draft pays the steps that made its right guesses (and none for a
    wrong one); prompt lookup and the store cost none. An upper bound of every policy
    over the same sites (at K ≤ the traced depth), not a policy: no rule knows which
    guesses hold."""

    def choose(s: Site, k: int) -> Pick:
        options = [Pick(0, 0, 0)]
        if lookup and s.ngram_order:
            options.append(Pick(min(k, s.ngram_ok), min(k, s.ngram_ok), 0))
        if replies and s.store_order:
            options.append(Pick(min(k, s.store_ok), min(k, s.store_ok), 0))
        if draft and s.eagle_confs:
            n = min(k, s.eagle_ok)
            options.append(Pick(n, n, n))
        return max(options, key=lambda p: (p.ok, -p.steps))

    return choose


def chain_speedup(alpha: float, costs: Costs, k: int) -> float:
    """Speedup of a K-token chain whose every guess holds with probability ``alpha``
    once the ones before it did: expected tokens a pass (1 + α + … + α^K) over the
    pass's cost (K + 1 rows and K draft steps)."""
    tokens = sum(alpha**i for i in range(k + 1))
    return tokens / (costs.verify(k + 1) + k * costs.draft_step)


def agreement_for(speedup: float, costs: Costs, k_max: int = 8) -> float:
    """The per-guess acceptance α a chain needs (at its best K ≤ k_max) to reach
    ``speedup`` at these pass costs; 1.0 when not even α = 1 reaches it. What a draft
    has to agree with its target for a goal, read off the machine's own cost curve."""

    def best(a: float) -> float:
        return max(chain_speedup(a, costs, k) for k in range(1, k_max + 1))

    if best(1.0) < speedup:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(40):  # bisection: best() rises with α
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if best(mid) < speedup else (lo, mid)
    return round(hi, 3)
