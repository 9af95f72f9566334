"""The reply set of `bench tts --set replies` and the TTS domain corpus.

The reply set must stay held out: its prompts may never be among the prompts
the project trains on (the draft's distillation prompts, which the domain
corpus also uses, and the LLM benchmark's prompt sets)."""

from __future__ import annotations

import random

from voicepipe.bench.llm import PROMPTS as LLM_BENCH_PROMPTS
from voicepipe.bench.tts_replies import PREFERRED, load_replies, prompts, replies_path
from voicepipe.core.text.chunker import _MARKDOWN
from voicepipe.training.draft_prompts import (
    OPEN_PROMPTS,
    heldout_prompts,
    norm,
    train_prompts,
)


def test_reply_prompts_are_many_distinct_and_disjoint_from_training_prompts() -> None:
    ps = prompts()
    assert len(ps) >= 110
    keys = [norm(p) for p in ps]
    assert len(set(keys)) == len(keys)
    # 12,000 asks for more than the three series hold: the whole training list.
    known = train_prompts(12_000) + heldout_prompts(200) + list(OPEN_PROMPTS)
    known += [p for group in LLM_BENCH_PROMPTS.values() for p in group]
    clash = sorted(set(keys) & {norm(p) for p in known})
    assert not clash, clash


def test_stored_replies_cover_the_prompts_for_both_models() -> None:
    ps = prompts()
    for model in PREFERRED:
        assert replies_path(model).exists(), model
        data = load_replies(model)
        assert data["model"] == model
        assert data["generation"]["temperature"] == 0.0
        assert data["generation"]["system_prompt"]
        rows = data["replies"]
        assert len(rows) >= 100
        assert [r["prompt"] for r in rows] == ps[: len(rows)]
        for r in rows:
            assert r["reply"].strip(), r["prompt"]
            # The chunks are what the TTS stage was handed: together, the whole reply
            # (less the markdown the chunker drops).
            plain = _MARKDOWN.sub("", r["reply"])
            assert norm(" ".join(r["chunks"])) == norm(plain), r["prompt"]


def test_default_replies_are_the_first_stored_model() -> None:
    assert load_replies()["model"] == PREFERRED[0]


def test_domain_templates_speak_as_words_after_the_front_end() -> None:
    from voicepipe.core.text.norm import normalize
    from voicepipe.training.tts_domain_templates import sentence

    r = random.Random(3)
    texts = [sentence(r) for _ in range(300)]
    assert texts == [sentence(x) for x in [random.Random(3)] for _ in range(300)]
    assert len(set(texts)) > 250
    spoken = [normalize(t) for t in texts]
    assert not [s for s in spoken if any(c.isdigit() or c in "$€£¥%°" for c in s)]


def test_domain_reply_chunks_are_the_llm_stage_chunks() -> None:
    from voicepipe.core.text.chunker import Chunker
    from voicepipe.training.tts_domain import chunk_reply

    reply = "Sure! Here are three tips: 1. Sleep well. 2. Drink water, e.g. 2 L a day."
    streamed = Chunker()
    out: list[str] = []
    for word in reply.split(" "):  # as deltas, the way the stage receives them
        out += streamed.push(word + " ")
    rest = streamed.flush()
    out += [rest] if rest else []
    assert chunk_reply(reply) == [c for c in out if c.strip()]
    assert len(chunk_reply(reply)) >= 2
