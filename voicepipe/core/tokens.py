"""Token-sequence helpers every part that caches keys and values shares (sans-I/O)."""

from __future__ import annotations

from collections.abc import Sequence


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share: what a cache built from one keeps
    for the other."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def common_suffix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many trailing tokens ``a`` and ``b`` share, short of the whole of either: for two
    renders of a chat prompt that differ only in the user's words, the tokens the template
    puts after them (the end of the user's turn, the assistant header)."""
    n = 0
    while n < min(len(a), len(b)) - 1 and a[-1 - n] == b[-1 - n]:
        n += 1
    return n
