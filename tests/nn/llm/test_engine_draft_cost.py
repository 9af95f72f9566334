"""A GGUF draft model in the engine is priced per drafted token (spec.adaptive)."""

from __future__ import annotations

import pytest


def test_a_draft_as_costly_as_the_target_is_not_used_and_changes_nothing() -> None:
    from voicepipe.nn.llm.engine import load_engine

    # The default model drafting for itself: every guess is right, but each costs
    # a whole target step, so no K beats plain decoding and speculation pauses.
    eng = load_engine("smollm2-135m", "int4", "smollm2-135m", max_len=256, draft_weights="int4")
    assert eng.draft_cost == pytest.approx(1.0)
    ids = eng.tokenizer.chat_ids([{"role": "user", "content": "Name a color."}])
    stop = set(eng.tokenizer.stop_ids)
    dec = eng.fork().decoder()
    spec = [t for step in dec.generate(ids, 24, stop) for t in step]
    drafted = dec.metrics.drafted
    plain_eng = load_engine("smollm2-135m", "int4", "none", max_len=256)
    plain = [t for step in plain_eng.decoder().generate(ids, 24, stop) for t in step]
    assert spec == plain
    # One probe pass, then a pause of CostAwareK's cooldown, and so on.
    assert 0 < drafted <= 24 // 8 + 1


def test_prompt_lookup_in_front_of_a_draft_model() -> None:
    from voicepipe.nn.llm.engine import load_engine
    from voicepipe.speculative.hybrid import HybridProposer

    # "ngram+<GGUF model>": lookups where the context has a 2-token match, the model
    # elsewhere, priced by its own CostAwareK (here it never pays: it is the target).
    eng = load_engine("smollm2-135m", "int4", "ngram+smollm2-135m", max_len=256)
    assert isinstance(eng.proposer, HybridProposer) and eng.proposer.draft_ctl is not None
    assert eng.proposer.draft_ctl.draft_cost == pytest.approx(1.0)
    stop = set(eng.tokenizer.stop_ids)
    plain_eng = load_engine("smollm2-135m", "int4", "none", max_len=256)
    text = "The quick brown fox jumps over the lazy dog near the old mill by the river."
    fork = eng.fork()
    for q in (f'Repeat exactly: "{text}"', "Name a color."):
        ids = eng.tokenizer.chat_ids([{"role": "user", "content": q}])
        dec = fork.decoder()
        spec = [t for step in dec.generate(ids, 32, stop) for t in step]
        plain = [t for step in plain_eng.decoder().generate(ids, 32, stop) for t in step]
        assert spec == plain, q
    assert fork.proposer.used_ngram > 0  # the quote came from prompt lookup
    with pytest.raises(ValueError, match="name a draft model"):
        load_engine("smollm2-135m", "int4", "ngram+ngram", max_len=256)
