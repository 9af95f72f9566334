"""Batched decoding across sessions (``llm.batching``) with the real fast-profile model:
the fused kernel's batched pass, greedy output identical to a session decoded alone,
and a barge-in cancelling one session's reply inside a batch."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import torch

from tests.profile import fast
from voicepipe.config import Config
from voicepipe.frames import Frame, Interrupt, TextChunk, TextDelta, TranscriptFinal
from voicepipe.stages.llm.engine import engine_for
from voicepipe.stages.llm.stage import LlmStage

QUESTIONS = (
    "What is the capital of France?",
    "Tell me a fun fact about the moon.",
    "How do I make a cup of tea?",
)


@pytest.fixture(scope="module")
def cfg() -> Config:
    c = fast()
    return dataclasses.replace(c, llm=dataclasses.replace(c.llm, max_new_tokens=48))


@pytest.fixture(scope="module")
def engine(cfg):
    return engine_for(cfg)


def _batched(cfg: Config) -> Config:
    return dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, batching=True))


def _prefilled_pairs(engine):
    """Two forks per question, each with the question's prompt prefilled: one to score
    alone, one to score in a batch (skips without the fused kernel)."""
    if engine.target.model.fused is None:
        pytest.skip("no fused kernel here")
    prompts = [engine.tokenizer.chat_ids([{"role": "user", "content": q}]) for q in QUESTIONS]
    alone, batched = [engine.fork() for _ in prompts], [engine.fork() for _ in prompts]
    for a, b, p in zip(alone, batched, prompts, strict=True):
        a.target.prefill(p)
        b.target.prefill(p)
    return alone, batched


def test_forward_batch_rows_equal_each_callers_own_pass(engine) -> None:
    """Three caches at different positions in one kernel call: each segment's logits and
    cache rows are bit-identical to its own pass."""
    from voicepipe.nn.llm.batched import Pass, score_batch

    model = engine.target.model
    alone, batched = _prefilled_pairs(engine)
    rows = [[11, 22, 33], [44], [55, 66]]  # a verify pass of 2, 0 and 1 drafts
    want = [e.target.score(r) for e, r in zip(alone, rows, strict=True)]
    got = score_batch(model, [Pass(e.target, r) for e, r in zip(batched, rows, strict=True)])
    for w, g, a, b in zip(want, got, alone, batched, strict=True):
        assert (w.logits == g.logits).all() and (w.best == g.best).all()
        assert a.target.fed == b.target.fed and a.target.length == b.target.length
        assert torch.equal(a.target.cache.kv, b.target.cache.kv)
        if a.target.feats is not None:
            assert torch.equal(a.target.feats, b.target.feats)


def test_sessions_sharing_a_system_prompt_read_it_once_and_stay_bit_identical(engine) -> None:
    """Caches that start with the same prefix-cache entry (a 40-odd token system prompt:
    not a whole number of key blocks) are marked shared in a batched pass, and every
    segment's logits and cache rows are still bit-identical to its own pass alone."""
    from voicepipe.nn.llm.batched import Pass, score_batch, shared_prefixes
    from voicepipe.stages.llm.engine import system_prefix

    if engine.target.model.fused is None:
        pytest.skip("no fused kernel here")
    sys_prompt = "You are a careful assistant who answers in one short sentence, kindly."
    head = [{"role": "system", "content": sys_prompt}]
    prefix = system_prefix(engine.tokenizer, sys_prompt)
    assert len(prefix) % 16
    engine.share_prefix(prefix)
    prompts = [
        engine.tokenizer.chat_ids([*head, {"role": "user", "content": q}]) for q in QUESTIONS
    ]
    alone, batched = [engine.fork() for _ in prompts], [engine.fork() for _ in prompts]
    for a, b, p in zip(alone, batched, prompts, strict=True):
        a.target.prefill(p)
        b.target.prefill(p)
    passes = [Pass(e.target, [11 + i, 22]) for i, e in enumerate(batched)]
    refs, lens = shared_prefixes(passes)
    assert refs == [-1, 0, 0] and lens == [0, len(prefix), len(prefix)]
    # The kernel must read the shared blocks from the first cache: wipe them in the
    # others (whole 16-key blocks only; the rest of the prefix stays each cache's own).
    whole = len(prefix) // 16 * 16
    for e in batched[1:]:
        e.target.cache.kv[:, :, :, :whole] = 0.0
    want = [e.target.score([11 + i, 22]) for i, e in enumerate(alone)]
    got = score_batch(engine.target.model, passes)
    for w, g, a, b in zip(want, got, alone, batched, strict=True):
        assert (w.logits == g.logits).all() and (w.best == g.best).all()
        assert torch.equal(a.target.cache.kv[:, :, :, whole:], b.target.cache.kv[:, :, :, whole:])


async def _reply(stage: LlmStage, text: str, turn: int = 1) -> str:
    got: list[Frame] = []

    async def sink(f: Frame) -> None:
        got.append(f)

    stage.push = sink
    await stage.reply(turn, text)
    return "".join(f.text for f in got if isinstance(f, TextDelta))


async def test_batched_greedy_replies_equal_each_session_alone(cfg, engine) -> None:
    from voicepipe.schedulers.llm_batch import batcher_for

    alone = [await _reply(LlmStage(cfg, engine.fork()), q) for q in QUESTIONS]
    b = batcher_for(engine)
    steps0, rows0 = b.steps, b.rows
    stages = [LlmStage(_batched(cfg), engine.fork()) for _ in QUESTIONS]
    together = await asyncio.gather(*(_reply(s, q) for s, q in zip(stages, QUESTIONS, strict=True)))
    assert together == alone and all(alone)
    # The replies shared passes: more rows than passes, and passes of several sessions.
    assert b.steps > steps0 and b.rows - rows0 > b.steps - steps0
    assert b.max_batch >= 2


async def test_barge_in_cancels_one_session_inside_a_batch(cfg, engine) -> None:
    long_q = "Write a long story about a dragon who learns to bake bread."
    other_q = QUESTIONS[1]
    ref = await _reply(LlmStage(cfg, engine.fork()), other_q)

    cut = LlmStage(_batched(cfg), engine.fork())
    other = LlmStage(_batched(cfg), engine.fork())
    got: list[Frame] = []
    first = asyncio.Event()

    async def sink(f: Frame) -> None:
        got.append(f)
        if isinstance(f, TextDelta):
            first.set()

    cut.push = sink
    task = asyncio.create_task(cut.run())
    await cut.put(TranscriptFinal(turn_id=1, text=long_q))
    other_reply = asyncio.create_task(_reply(other, other_q))
    await asyncio.wait_for(first.wait(), 300)
    await cut.put(Interrupt(turn_id=2))
    await asyncio.sleep(0.5)  # steps the other session decodes meanwhile
    assert await asyncio.wait_for(other_reply, 300) == ref  # the other reply is untouched
    i = next(i for i, f in enumerate(got) if isinstance(f, Interrupt))
    after = got[i + 1 :]
    assert not any(isinstance(f, (TextDelta, TextChunk)) and f.turn_id == 1 for f in after)
    assert not any(isinstance(f, TextChunk) and f.last for f in got)  # never finished
    from voicepipe.frames import End

    await cut.put(End())
    await asyncio.wait_for(task, 60)
    # The cancelled session can talk again, batched, and its reply is whole.
    again = await _reply(cut, other_q, turn=3)
    assert again


class _SpyKernel:
    """The fused kernel, noting the thread count each batched pass asked for."""

    def __init__(self, real) -> None:
        self.real, self.threads = real, []

    def forward_batch(self, *args, **kw):
        self.threads.append(args[-1])
        return self.real.forward_batch(*args, **kw)

    def __getattr__(self, name: str):
        return getattr(self.real, name)


@pytest.mark.parametrize("decode_threads", [1, 2])
def test_a_batched_pass_takes_the_decode_threads_and_stays_bit_identical(
    engine, decode_threads: int
) -> None:
    """llm.decode_threads = 2 (the 1.5B default): a batched pass of a few rows, run while
    no other model call is in flight, takes both cores as a lone decode pass does; rows
    stay bit-identical to each session's own one-thread pass."""
    from voicepipe.nn.llm.batched import Pass, score_batch

    model = engine.target.model
    alone, batched = _prefilled_pairs(engine)
    for b in batched:
        b.target.decode_threads = decode_threads
    rows = [[11, 22], [44], [55, 66]]
    want = [e.target.score(r) for e, r in zip(alone, rows, strict=True)]
    spy = _SpyKernel(model.fused)
    model.fused = spy
    try:
        got = score_batch(model, [Pass(e.target, r) for e, r in zip(batched, rows, strict=True)])
    finally:
        model.fused = spy.real
    assert spy.threads == [2 if decode_threads == 2 else 0]  # 0: the kernel's own (one)
    for w, g in zip(want, got, strict=True):
        assert (w.logits == g.logits).all() and (w.best == g.best).all()
