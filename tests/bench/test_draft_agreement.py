"""bench draft --agreement: a trained draft's teacher-forced first guesses agree with the
target far more often than an untrained draft's, every reply token is counted, and the
in-vocabulary share is never below the overall one."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def replies():
    from voicepipe.nn.llm.engine import load_engine

    eng = load_engine("smollm2-135m", "int4", "none", max_len=512)
    dec = eng.fork().decoder()
    stop = set(eng.tokenizer.stop_ids)
    out = []
    for q in ("Why do cats purr?", "How do I boil an egg?", "What is the capital of Peru?"):
        ids = eng.tokenizer.chat_ids([{"role": "user", "content": q}])
        ref: list[int] = []
        for toks in dec.generate(ids, 32, stop):
            ref += toks
        out.append((ids, ref))
    return eng.model, out


def test_a_trained_draft_agrees_and_an_untrained_one_does_not(replies) -> None:
    from voicepipe.bench.draft_agreement import PROMPT_CTX, agreement
    from voicepipe.bench.draft_agreement import samples as make_samples
    from voicepipe.nn.llm.draft_model import EagleDraft
    from voicepipe.nn.llm.draft_spec import load_draft

    model, pairs = replies
    samples = make_samples(model, pairs)
    assert len(samples) == len(pairs)
    for s, (ids, ref) in zip(samples, pairs, strict=True):  # the window the draft trained on
        assert s["tokens"].tolist() == (ids + ref)[len(ids) - PROMPT_CTX :]
        assert s["prompt_len"] == PROMPT_CTX and len(s["feats"]) == len(s["tokens"]) - 1
    emb = model.embed.float()
    trained = load_draft("smollm2-draft").float().eval()
    got = agreement(trained, emb, samples)
    assert got["positions"] == sum(len(ref) for _, ref in pairs)  # every reply token
    assert 0 < got["in_vocab_positions"] <= got["positions"]
    assert got["in_vocab"] >= got["first_guess"] > 0.3, got
    untrained = EagleDraft(trained.args, trained.vocab).float().eval()
    assert agreement(untrained, emb, samples)["first_guess"] < 0.1


def test_a_draft_model_is_held_to_the_same_positions(replies) -> None:
    # The target as its own draft model guesses every token of its greedy replies, and
    # seldom one of the same replies read backwards.
    from voicepipe.bench.draft_agreement import model_agreement

    model, pairs = replies
    got = model_agreement(model, pairs)
    assert got["positions"] == sum(len(ref) for _, ref in pairs)
    assert got["first_guess"] == got["in_vocab"] == 1.0, got
    backwards = [(ids, ref[::-1]) for ids, ref in pairs]
    assert model_agreement(model, backwards)["first_guess"] < 0.3
