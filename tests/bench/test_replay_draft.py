"""`bench replay`'s default draft is the one the config's model decodes with."""

from __future__ import annotations

from voicepipe.bench.replay import draft_of
from voicepipe.config import Config


def test_the_default_draft_follows_the_configs_drafter() -> None:
    assert draft_of(Config().llm.drafter) == "qwen2.5-coder-1.5b-draft"  # the default 1.5B's
    assert draft_of("ngram+smollm2-draft") == "smollm2-draft"  # configs/fast.toml's
    assert draft_of("smollm2-draft") == "smollm2-draft"
    assert draft_of("ngram") == draft_of("none") == ""  # no draft: the bench asks for one
    assert draft_of("ngram+smollm2-135m") == ""  # a GGUF draft model, not an EAGLE draft
