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
contiguous range that narrows as n grows. Those tokens are packed four to a
64-bit word (16 bits each; three of 21 bits for a vocabulary past 65,533 ids, as
Qwen2.5's 151,936), so one sorted search finds the ranges of every order a word
holds at once: a lookup is a numpy call or two per word, not two per order.
That matters more than it seems: right after a target pass has swept the
caches, every numpy call and every cache miss costs several times its warm
price (the first version, a search per order and the deeper keys gathered
from the token array, took ~110 µs per lookup there against ~20 warm).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from voicepipe.speculative.types import Proposal

END = -1  # no token: before a record's first token, after its last
MAX_N = 8  # longest match
# Key bits: token + 1 packed per key (END packs as 0, sorting first); ids below
# 2**bits - 2 pack (the last bound of an all-ones key would overflow). A store
# whose ids all fit 16 bits packs four keys a word; else three of 21 bits.
KEY_BITS = (16, 21)
MAX_TOKEN = (1 << KEY_BITS[0]) - 2  # a store of ids below it packs four keys a word


def key_bits(max_token: int) -> int:
    """The narrowest key width that packs ids up to ``max_token``."""
    for bits in KEY_BITS:
        if max_token < (1 << bits) - 2:
            return bits
    raise ValueError(f"token id {max_token} too large to pack (< {(1 << KEY_BITS[-1]) - 2})")


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

    small = 64  # a continuation over this few rows is followed in plain Python

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
        if len(tokens) and tokens.min() < 0:
            raise ValueError("token ids must be non-negative")
        if not 1 <= max_n <= MAX_N:
            raise ValueError(f"max_n must be in [1, {MAX_N}]")
        self.max_n = max_n
        self.bits = key_bits(int(tokens.max()) if len(tokens) else 0)
        self.max_token = (1 << self.bits) - 2  # ids at or past it never match
        self.word = 64 // self.bits  # keys per packed word
        n_words = -(-max_n // self.word)
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
        # Key j of a position: the token j + 1 before it, END past its record's start;
        # with 16-bit keys, keys 0-3 packed in words[0], 4-7 in words[1], key 0 (4) in
        # the top bits.
        W = self.word
        words = np.zeros((n_words, len(pos)), dtype=np.uint64)
        alive = np.ones(len(pos), dtype=bool)
        for j in range(n_words * W):
            prev = flat[pos - 1 - j].astype(np.int64)
            alive &= prev != END
            shift = np.uint64(self.bits * (W - 1 - j % W))
            words[j // W] |= np.where(alive, prev + 1, 0).astype(np.uint64) << shift
        order = np.lexsort(words[::-1])  # by key 0, then key 1, …
        self.pos = pos[order].astype(np.int32)
        self.words = np.ascontiguousarray(words[:, order])
        # Element reads as Python ints, no numpy call.
        self._fa = memoryview(self.flat.data)

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
        n = min(self.max_n, len(context))
        lo, hi, best = 0, len(self.pos), Match()
        W, bits = self.word, self.bits
        for w in range(len(self.words)):
            keys = []
            for j in range(W * w, min(n, W * (w + 1))):
                t = context[-1 - j]
                if not 0 <= t < self.max_token:  # never in the store: nothing matches past it
                    break
                keys.append(t + 1)
            if not keys:
                break
            # Rows [lo, hi) agree on the words before this one, so this word is sorted
            # there; its rows whose top i keys match form [lower_i, upper_i).
            bounds, prefix = [], 0
            for i, key in enumerate(keys):
                prefix = (prefix << bits) | key
                low = prefix << (bits * (W - 1 - i))
                bounds += [low, low + (1 << (bits * (W - 1 - i)))]
            found = self.words[w, lo:hi].searchsorted(np.array(bounds, dtype=np.uint64))
            found = (found + lo).tolist()
            for i in range(len(keys)):  # the ranges nest: stop at the first too small
                a, b = found[2 * i], found[2 * i + 1]
                if b - a < min_count:
                    return best
                best = Match(W * w + i + 1, a, b)
            lo, hi = best.lo, best.hi
            if len(keys) < W:
                break
        return best

    def continuation(
        self, m: Match, k: int, min_path: float, min_count: int = 2
    ) -> tuple[list[int], list[float]]:
        """Follow the match's most frequent continuation while the product of each
        step's share of the still-agreeing occurrences stays ≥ min_path (and ≥
        min_count of them agree): (tokens, shares). Of equally frequent tokens,
        the smallest id."""
        if m.hi - m.lo <= self.small:
            return self._follow_small(self.pos[m.lo : m.hi].tolist(), k, min_path, min_count)
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
            if len(cand) <= self.small:
                t2, s2 = self._follow_small(
                    cand.tolist(), k - step - 1, min_path, min_count, step + 1, path
                )
                return toks + t2, shares + s2
        return toks, shares

    def _follow_small(
        self,
        rows: list[int],
        k: int,
        min_path: float,
        min_count: int,
        offset: int = 0,
        path: float = 1.0,
    ) -> tuple[list[int], list[float]]:
        """continuation() over a few rows in plain Python (after a target pass each
        numpy call costs ~10 µs), from ``offset`` tokens in with the path so far."""
        fa = self._fa
        toks: list[int] = []
        shares: list[float] = []
        for step in range(offset, offset + k):
            nxt = [fa[p + step] for p in rows]
            counts = Counter(x for x in nxt if x != END)
            if not counts:
                break
            tok, c = max(counts.items(), key=lambda kv: (kv[1], -kv[0]))
            share = c / len(nxt)
            if c < min_count or path * share < min_path:
                break
            path *= share
            toks.append(tok)
            shares.append(share)
            rows = [p for p, x in zip(rows, nxt, strict=True) if x == tok]
        return toks, shares


class ReplyProposer:
    """Drafts the store's likeliest continuation of the context's longest match of
    ≥ min_n tokens, as long as its path probability stays ≥ min_path."""

    name = "replies"

    def __init__(self, index: ReplyIndex, min_n: int = 2, min_path: float = 0.5) -> None:
        self.index = index
        self.min_n = min_n
        self.min_path = min_path
        self.last_shares: list[float] = []  # behind each token of the last proposal

    def reset(self) -> None:
        self.last_shares = []  # the store itself never changes

    def propose(self, context: list[int], k: int) -> Proposal:
        self.last_shares = []
        if k <= 0:
            return Proposal(tokens=[])
        m = self.index.match(context)
        if m.order < self.min_n:
            return Proposal(tokens=[])
        toks, self.last_shares = self.index.continuation(m, k, self.min_path)
        return Proposal(tokens=toks)
