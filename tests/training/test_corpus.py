"""The TTS corpus is reproducible, varied, and its held-out split never leaks into training."""

from __future__ import annotations

from voicepipe.training.corpus import _key, sentences


def test_reproducible_and_disjoint() -> None:
    tr1, ho1 = sentences(500, 20, seed=7)
    tr2, ho2 = sentences(500, 20, seed=7)
    assert tr1 == tr2 and ho1 == ho2
    assert len(tr1) == 500 and len(ho1) == 20
    train_keys = {_key(s) for s in tr1}
    assert not train_keys & {_key(s) for s in ho1}
    assert len(train_keys) == 500


def test_varied_lengths_and_kinds() -> None:
    tr, _ = sentences(1000, 10, seed=0)
    words = [len(s.split()) for s in tr]
    assert min(words) <= 2 and 20 <= max(words) <= 25
    assert sum(s.endswith("?") for s in tr) > 50  # questions
    assert sum(any(c.isdigit() for c in s) for s in tr) > 150  # numbers, dates, times
    assert sentences(100, 5, seed=1)[0] != tr[:100]
