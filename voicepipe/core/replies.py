"""Retrieval drafting: propose what followed the context's last n-gram in the
target's own past replies (REST-style, over a fixed store; no model, no I/O).

A small assistant model words much of what it says the same way every time
("I'm sorry, but as a helpful voice assistant, I …", "Here are three …"), so
its greedy replies to a few thousand prompts (the draft's distillation data,
``voicepipe train draft --stage replies``) predict its phrasing: where the
context's last tokens occurred before, the continuation they had most often is
what it will say again. Unlike prompt lookup this reads no context but a
store; unlike the EAGLE draft it costs no draft step.

The index sorts every reply position by the tokens before it, read backwards,
so the positions whose preceding n tokens equal the context's last n form one
contiguous range that narrows as n grows (a binary search per order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from voicepipe.core.spec import Proposal

END = -1  # no token: before a record's first token, after its last
HEAD = 2  # key columns kept in memory (8 would take ~50 MB for 1.5M reply tokens)


@dataclass(frozen=True)
class Match:
    """The longest suffix match: its order (0: none) and the store positions
    (sorted index range [lo, hi)) of the tokens that followed it."""

    order: int = 0
    lo: int = 0
    hi: int = 0


class ReplyIndex:
    """Reply records: ``tokens`` concatenated, record r is tokens[bounds[r]:bounds[r+1]]
    and its reply starts at bounds[r] + reply_at[r] (what comes before is the prompt's
    tail, so a reply's first tokens are found after the chat template's header).
    Only reply tokens are ever proposed."""

    def __init__(
        self,
        tokens: np.ndarray,
        bounds: np.ndarray,
        reply_at: np.ndarray,
        max_n: int = 8,
    ) -> None:
        tokens = np.asarray(tokens, dtype=np.int64)
        bounds = np.asarray(bounds, dtype=np.int64)
        reply_at = np.asarray(reply_at, dtype=np.int64)
        if bounds.ndim != 1 or len(bounds) != len(reply_at) + 1 or bounds[-1] != len(tokens):
            raise ValueError("bounds must be (records + 1,) and end at len(tokens)")
        if np.any(np.diff(bounds) <= 0) or np.any(reply_at < 0):
            raise ValueError("records must be non-empty, reply offsets non-negative")
        self.max_n = max_n
        # flat: records separated by END, so a continuation stops at its record's end
        # and a backwards key stops at its record's start (the context never holds END).
        n_rec = len(reply_at)
        starts = bounds[:-1] + np.arange(n_rec)  # each record shifted by the ENDs before it
        flat = np.full(len(tokens) + n_rec + 1, END, dtype=np.int32)
        lens = np.diff(bounds)
        rec_of = np.repeat(np.arange(n_rec), lens)
        flat[np.arange(len(tokens)) + rec_of + 1] = tokens
        self.flat = flat
        # Candidate positions: reply tokens (what a match would propose first).
        first = starts + 1 + np.minimum(reply_at, lens)
        last = starts + 1 + lens
        pos = np.concatenate([np.arange(a, b) for a, b in zip(first, last, strict=True)])
        # Key j of a position: the token j + 1 before it, END past its record's start.
        keys = np.empty((max_n, len(pos)), dtype=np.int32)
        alive = np.ones(len(pos), dtype=bool)
        for j in range(max_n):
            prev = flat[pos - 1 - j]
            alive &= prev != END
            keys[j] = np.where(alive, prev, END)
        order = np.lexsort(keys[::-1])  # by key 0, then key 1, …
        self.pos = pos[order].astype(np.int32)
        # Only the first HEAD key columns are kept (the searches over the whole store);
        # deeper ones are read from flat over the few positions still matching.
        self.head = np.ascontiguousarray(keys[:HEAD, order])

    @classmethod
    def from_records(
        cls, records: Sequence[tuple[Sequence[int], int]], max_n: int = 8
    ) -> ReplyIndex:
        """From (tokens, reply_at) records."""
        lens = [len(t) for t, _ in records]
        bounds = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        tokens = np.concatenate([np.asarray(t, dtype=np.int64) for t, _ in records])
        return cls(tokens, bounds, np.array([r for _, r in records]), max_n)

    @classmethod
    def load(cls, path: str, max_n: int = 8) -> ReplyIndex:
        with np.load(path) as z:
            return cls(z["tokens"], z["bounds"], z["reply_at"], max_n)

    def __len__(self) -> int:
        return len(self.pos)

    def match(self, context: Sequence[int], min_count: int = 2) -> Match:
        """The longest suffix of context (up to max_n tokens) seen ≥ min_count times."""
        lo, hi, best = 0, len(self.pos), Match()
        for j in range(min(self.max_n, len(context))):
            # Rows [lo, hi) share keys 0..j-1, so their key j is sorted; past the
            # first END a key is END in the sort, but no such row matches this far.
            col = self.head[j, lo:hi] if j < HEAD else self.flat[self.pos[lo:hi] - 1 - j]
            t = np.int32(context[-1 - j])  # an int64 key would make numpy cast all of col
            a = lo + int(np.searchsorted(col, t, "left"))
            b = lo + int(np.searchsorted(col, t, "right"))
            if b - a < min_count:
                break
            lo, hi = a, b
            best = Match(j + 1, lo, hi)
        return best

    def continuation(
        self, m: Match, k: int, min_path: float, min_count: int = 2
    ) -> tuple[list[int], list[float]]:
        """Follow the match's most frequent continuation while the product of each
        step's share of the still-agreeing occurrences stays ≥ min_path (and ≥
        min_count of them agree): (tokens, shares)."""
        cand = self.pos[m.lo : m.hi]
        toks: list[int] = []
        shares: list[float] = []
        path = 1.0
        for step in range(k):
            nxt = self.flat[cand + step]
            vals, counts = np.unique(nxt[nxt != END], return_counts=True)
            if not len(vals):
                break
            i = int(counts.argmax())
            share = counts[i] / len(nxt)  # a record that ended counts against
            if counts[i] < min_count or path * share < min_path:
                break
            path *= share
            toks.append(int(vals[i]))
            shares.append(float(share))
            cand = cand[nxt == vals[i]]
        return toks, shares


class ReplyProposer:
    """Drafts the store's likeliest continuation of the context's longest match of
    ≥ min_n tokens, as long as its path probability stays ≥ min_path."""

    name = "replies"

    def __init__(self, index: ReplyIndex, min_n: int = 2, min_path: float = 0.5) -> None:
        self.index = index
        self.min_n = min_n
        self.min_path = min_path

    def reset(self) -> None:
        pass  # stateless: the store never changes

    def propose(self, context: list[int], k: int) -> Proposal:
        if k <= 0:
            return Proposal(tokens=[])
        m = self.index.match(context)
        if m.order < self.min_n:
            return Proposal(tokens=[])
        toks, _ = self.index.continuation(m, k, self.min_path)
        return Proposal(tokens=toks)
