"""``[llm] drafter`` parsed once: kinds, K ceilings, pause thresholds, errors."""

from __future__ import annotations

import pytest

from voicepipe.speculative.drafter import DrafterSpec, Tunings


def _parse(text: str, **kw: object) -> DrafterSpec:
    return DrafterSpec.parse(text, is_eagle=lambda n: n.endswith("-draft"), **kw)


def test_kinds_and_what_they_own() -> None:
    none = _parse("none")
    assert (none.kind, none.lookup) == ("none", False)
    ngram = _parse("ngram")
    assert (ngram.kind, ngram.k_max, ngram.verify_cost) == ("ngram", 8, 1.0)
    eagle = _parse("smollm2-draft")
    assert (eagle.kind, eagle.name, eagle.k_max, eagle.reply_store) == (
        "eagle",
        "smollm2-draft",
        3,
        False,
    )
    hybrid = _parse("ngram+smollm2-draft")
    assert (hybrid.kind, hybrid.lookup, hybrid.reply_store, hybrid.k_max) == (
        "eagle",
        True,
        True,
        6,
    )
    assert not _parse("ngram+smollm2-draft", reply_store=False).reply_store
    model = _parse("qwen2.5-coder-0.5b")
    assert (model.kind, model.k_max, model.verify_cost) == ("model", 8, 1.5)
    behind = _parse("ngram+qwen2.5-coder-0.5b")
    assert (behind.kind, behind.reply_store, behind.verify_cost) == ("model", False, 1.0)
    assert _parse("smollm2-draft", tunings=Tunings(eagle_k=4)).k_max == 4


@pytest.mark.parametrize("text", ["ngram+", "ngram+none", "ngram+ngram", "a+b"])
def test_bad_settings_name_themselves(text: str) -> None:
    with pytest.raises(ValueError, match="drafter"):
        _parse(text)
