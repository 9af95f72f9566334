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
