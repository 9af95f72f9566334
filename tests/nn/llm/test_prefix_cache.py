"""Prefix cache and chunked prefill on the default engine (SmolLM2-135M int4 + EAGLE draft).

Greedy replies must be token-identical whether the prompt was prefilled in one
pass on a cold cache, in chunks, or after copying the system prompt's keys and
values from the process-wide prefix cache.
"""

from __future__ import annotations

import pytest
import torch

from tests.profile import fast
from voicepipe.nn.llm.kv_cache import KVCache
from voicepipe.nn.llm.prefix import Prefix, PrefixStore

QUESTIONS = ("How do I make a cup of tea?", "And how long should it steep?", "Thanks! Any tip?")
N_NEW = 24


@pytest.fixture(scope="module")
def engine():
    from voicepipe.nn.llm.engine import load_engine

    c = fast().llm
    return load_engine(c.model, c.weights, c.drafter, c.spec_k, max_len=1024)


def _need_fused(engine) -> None:
    """Token identity across pass shapes and thread counts is the fused kernel's
    property (its rows are batch-invariant); aten's bf16 products, the fallback on a CPU
    with neither AVX2 nor AVX-512, block rows by batch size, so a chunked prefill may
    round apart."""
    if engine.model.fused is None:
        pytest.skip("no fused kernel here (no AVX2/AVX-512 build): pass shapes may round apart")


def _reply(eng, ids: list[int], chunk: int = 0) -> tuple[list[int], int]:
    """Greedy reply tokens; and the model passes the chunked prefill took."""
    passes = sum(1 for _ in eng.feed(ids, chunk)) if chunk else 0
    stop = eng.tokenizer.stop_ids
    return [t for step in eng.decoder().generate(ids, N_NEW, stop) for t in step], passes


def _conversation(engine) -> tuple[list[list[int]], list[list[int]]]:
    """Three turns' prompts and their reference replies: every prompt prefilled in one
    pass on a fresh cache, no prefix cache."""
    msgs = [{"role": "system", "content": fast().llm.system_prompt}]
    prompts, replies = [], []
    for q in QUESTIONS:
        msgs.append({"role": "user", "content": q})
        ids = engine.tokenizer.chat_ids(msgs)
        eng = engine.fork(prefix_cache=False)
        out, _ = _reply(eng, ids)
        assert eng.target.prefilled == len(ids) and eng.target.shared == 0  # all of it, cold
        prompts.append(ids)
        replies.append(out)
        text = engine.tokenizer.decode([t for t in out if t not in engine.tokenizer.stop_ids])
        msgs.append({"role": "assistant", "content": text})
    return prompts, replies


def test_prefix_cache_and_chunked_prefill_are_token_identical(engine) -> None:
    _need_fused(engine)
    from voicepipe.nn.llm.prefix import store_for
    from voicepipe.stages.llm.engine import system_prefix

    prompts, ref = _conversation(engine)
    store_for(engine.model).clear()
    head = system_prefix(engine.tokenizer, fast().llm.system_prompt)
    assert 0 < len(head) < len(prompts[0]) and prompts[0][: len(head)] == head

    first = engine.fork()
    assert first.share_prefix(head) == len(head)  # computed once, in this session's cache
    second = engine.fork()
    assert second.share_prefix(head) == 0  # already there: no model pass
    for sess in (first, second):
        for i, (ids, want) in enumerate(zip(prompts, ref, strict=True)):
            t = sess.target
            p0, s0 = t.prefilled, t.shared
            got, passes = _reply(sess, ids, chunk=8)
            assert got == want, (i, sess is second)
            new = t.prefilled - p0
            if i == 0:
                # The system prompt never goes through the model in a later session:
                # its keys and values come from the prefix cache.
                shared = t.shared - s0
                assert shared == (0 if sess is first else len(head))
                assert new == len(ids) - len(head)
                assert passes == -(-(new - 1) // 8)  # ceil: the decoder's prefill runs the last
            else:
                # Turn to turn, the cache keeps the last prompt and the reply it generated.
                assert t.shared == s0
                assert new < len(ids) - len(prompts[i - 1])


def test_prefix_store_finds_the_longest_entry_and_forgets_the_oldest() -> None:
    kv = torch.zeros(1, 2, 1, 0, 4)
    s = PrefixStore(limit=2)
    s.add(Prefix((1, 2), kv))
    s.add(Prefix((1, 2, 3), kv, feats=torch.zeros(3, 4)))
    assert s.longest([1, 2, 3, 4]).tokens == (1, 2, 3)
    assert s.longest([1, 2, 4]).tokens == (1, 2)
    assert s.longest([2, 1]) is None
    assert s.get((1, 2), feats=True) is None  # an entry without features serves no EAGLE target
    s.longest([1, 2])  # (1, 2) is now the most recently used
    s.add(Prefix((5,), kv))
    assert s.get((1, 2, 3)) is None and s.get((1, 2)) is not None and len(s) == 2


def test_kv_rows_round_trip_into_another_cache() -> None:
    a = KVCache(2, 1, 8, 4, torch.float32)
    k = torch.randn(2, 1, 5, 4)
    for layer in range(2):
        a.update(layer, 0, k[layer], -k[layer])
    a.advance(5)
    b = KVCache(2, 1, 8, 4, torch.float32)
    b.put_rows(0, a.rows(0, 3))
    b.put_rows(3, a.rows(3, 5))
    assert b.length == 5 and torch.equal(a.kv, b.kv)
    with pytest.raises(ValueError):
        b.put_rows(2, a.rows(0, 1))  # rows go right after what the cache holds


@pytest.mark.parametrize(
    "name",
    # Qwen's GGUF metadata (a 151k-token vocabulary) takes the gguf package a while to parse.
    ["smollm2-135m", pytest.param("qwen2.5-coder-0.5b", marks=pytest.mark.slow)],
)
def test_chat_templates_render_earlier_turns_unchanged(name: str) -> None:
    """What turn-to-turn reuse relies on: the next turn's prompt starts with the last
    prompt followed by the reply's tokens (the templates re-render nothing differently),
    and every prompt starts with the shared system prefix."""
    from voicepipe import registry
    from voicepipe.nn.llm import gguf
    from voicepipe.nn.llm.engine import gguf_path
    from voicepipe.nn.llm.tokenizer import ChatTokenizer
    from voicepipe.stages.llm.engine import system_prefix

    if registry.verify(name, deep=False):
        pytest.skip(f"{name} not pulled (voicepipe models pull {name})")
    tok = ChatTokenizer(gguf.load(gguf_path(name)).metadata)
    sys_prompt = fast().llm.system_prompt
    head = system_prefix(tok, sys_prompt)
    msgs = [{"role": "system", "content": sys_prompt}]
    replies = ["Boil water, then steep the tea for 3 minutes.", "About 3 to 5 minutes, no more."]
    for q, a in zip(QUESTIONS, replies, strict=False):
        msgs.append({"role": "user", "content": q})
        ids = tok.chat_ids(msgs)
        msgs.append({"role": "assistant", "content": a})
        held = ids + tok.encode(a, add_bos=False)  # what the cache holds after the reply
        nxt = tok.chat_ids([*msgs, {"role": "user", "content": "And then?"}])
        assert ids[: len(head)] == head and nxt[: len(held)] == held


def test_prompt_passes_on_two_threads_are_bit_identical(engine) -> None:
    # llm.prefill_threads: the kernel splits a pass by output rows and heads, so the
    # keys, values and logits of a prompt pass must not depend on the thread count.
    _need_fused(engine)
    from voicepipe.nn.llm.target import ModelTarget

    fused = engine.model.fused
    assert fused is not None and fused.threads == 1
    ids = engine.tokenizer.chat_ids([{"role": "user", "content": QUESTIONS[0]}])
    out = []
    for threads in (1, 2):
        t = ModelTarget(engine.model, 256)
        t.prefixes = None
        t.prefill_threads = threads
        logits = t.prefill(ids)
        assert fused.threads == 1  # restored after the pass: decode keeps one thread
        out.append((logits, t.cache.kv[:, :, :, : len(ids)].clone()))
    assert (out[0][0] == out[1][0]).all()
    assert torch.equal(out[0][1], out[1][1])


def test_decode_passes_on_two_threads_are_bit_identical(engine) -> None:
    # llm.decode_threads: a verify pass run alone may take both cores; its logits, argmax
    # rows and keys/values must not depend on the thread count (greedy stays identical).
    _need_fused(engine)
    from voicepipe.nn.llm.target import ModelTarget
    from voicepipe.nn.threads import BUDGET

    fused = engine.model.fused
    ids = engine.tokenizer.chat_ids([{"role": "user", "content": QUESTIONS[0]}])
    rows = engine.tokenizer.encode(" Boil the water first.", add_bos=False)
    out = []
    for threads in (1, 2):
        t = ModelTarget(engine.model, 256)
        t.prefixes = None
        t.decode_threads = threads
        t.prefill(ids)
        s = t.score(rows)
        assert fused.threads == 1 and BUDGET.active == 0  # restored, released
        out.append((s.logits, s.best, t.cache.kv[:, :, :, : t.length].clone()))
    assert (out[0][0] == out[1][0]).all() and (out[0][1] == out[1][1]).all()
    assert torch.equal(out[0][2], out[1][2])
