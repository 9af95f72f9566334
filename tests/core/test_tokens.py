"""core/tokens.py: the shared ends of token sequences."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voicepipe.core.tokens import common_prefix, common_suffix

seqs = st.lists(st.integers(0, 5), max_size=12)


def test_the_template_around_the_words() -> None:
    # system prompt + user header | words | end of turn + assistant header
    head, tail = [1, 2, 3], [9, 8, 7]
    a, b = head + [40, 41] + tail, head + [50] + tail
    assert common_prefix(a, b) == 3 and common_suffix(a, b) == 3
    assert common_suffix([1, 2], [1, 2]) == 1  # never the whole of either
    assert common_suffix([], [1]) == 0 and common_suffix([5, 6], [7]) == 0


@given(seqs, seqs)
def test_a_common_suffix_is_shared_and_leaves_a_token(a: list[int], b: list[int]) -> None:
    n = common_suffix(a, b)
    assert 0 <= n < max(1, min(len(a), len(b)))
    assert a[len(a) - n :] == b[len(b) - n :]
    if 0 < n + 1 < min(len(a), len(b)):  # it is the longest: the next one differs
        assert a[-1 - n] != b[-1 - n]
