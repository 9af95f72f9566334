"""LLM stage with the real default model: streaming, chunks, memory, interrupt."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import weakref
from types import SimpleNamespace

import pytest

from voicepipe.config import Config
from voicepipe.frames import (
    End,
    Frame,
    Interrupt,
    MetricsFrame,
    SpanFrame,
    SpeechResumed,
    TextChunk,
    TextDelta,
    TranscriptFinal,
    TranscriptStable,
)
from voicepipe.stages.llm.engine import engine_for
from voicepipe.stages.llm.reply import Reply
from voicepipe.stages.llm.stage import LlmStage


def _start(stage: LlmStage, until=None):
    """Run the stage into a list; (frames out, event set once until(f, got) holds, task)."""
    got: list[Frame] = []
    done = asyncio.Event()

    async def sink(f: Frame) -> None:
        got.append(f)
        if until is not None and until(f, got):
            done.set()

    stage.push = sink
    return got, done, asyncio.create_task(stage.run())


async def _end(stage: LlmStage, task: asyncio.Task, timeout: float = 300) -> None:
    await stage.put(End())
    await asyncio.wait_for(task, timeout)


async def _run(stage: LlmStage, frames: list[Frame], until) -> list[Frame]:
    got, done, task = _start(stage, until)
    for f in frames:
        await stage.put(f)
    await asyncio.wait_for(done.wait(), 300)
    await _end(stage, task)
    return got


async def test_streams_deltas_chunks_spans_and_remembers(cfg, engine) -> None:
    stage = LlmStage(cfg, engine.fork())
    last = lambda f, got: isinstance(f, TextChunk) and f.last and f.turn_id == 2  # noqa: E731
    got = await _run(
        stage,
        [
            TranscriptFinal(turn_id=1, text="Hi! Which city is the capital of France?"),
            TranscriptFinal(turn_id=2, text="And of Italy?"),
        ],
        last,
    )
    for turn in (1, 2):
        deltas = "".join(f.text for f in got if isinstance(f, TextDelta) and f.turn_id == turn)
        chunks = [f for f in got if isinstance(f, TextChunk) and f.turn_id == turn]
        assert deltas.strip() and chunks[-1].last and not any(c.last for c in chunks[:-1])
        assert " ".join(c.text for c in chunks if c.text).split() == deltas.split()
        names = [f.name for f in got if isinstance(f, SpanFrame) and f.turn_id == turn]
        assert "llm.ttft" in names and "llm.first_chunk" in names
        metrics = [f for f in got if isinstance(f, MetricsFrame) and f.turn_id == turn]
        assert metrics and metrics[0].values["tokens"] > 1
        (tpot,) = [
            f
            for f in got
            if isinstance(f, SpanFrame) and f.name == "llm.tpot" and f.turn_id == turn
        ]
        assert tpot.attrs["tokens"] == metrics[0].values["tokens"]
        assert tpot.duration_ms == pytest.approx(metrics[0].values["tpot_ms"], abs=0.01)
    # A real answer. "Which city": the int4 model's first token after "What is the capital"
    # is a near-tie (L 0.113 / The 0.110) that float summation order alone can flip.
    assert "Paris" in "".join(f.text for f in got if isinstance(f, TextDelta) and f.turn_id == 1)
    roles = [m["role"] for m in stage.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert stage.messages[0]["content"] == cfg.llm.system_prompt


async def _ttft_attrs(c: Config, questions: tuple[str, ...]) -> list[dict]:
    """One new session (its own engine, as the server gives each): llm.ttft attrs per turn."""
    stage = LlmStage(c, engine_for(c))
    attrs: list[dict] = []

    async def sink(f: Frame) -> None:
        if isinstance(f, SpanFrame) and f.name == "llm.ttft":
            attrs.append(f.attrs)

    stage.push = sink
    await stage.start()
    for turn, q in enumerate(questions, 1):
        await stage.reply(turn, q)
    return attrs


async def test_a_new_session_does_not_prefill_the_system_prompt(cfg, engine) -> None:
    from voicepipe.stages.llm.engine import system_prefix

    small = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, max_new_tokens=8))
    qs = ("What is a haiku?", "Write one about rain.")
    head = len(system_prefix(engine.tokenizer, cfg.llm.system_prompt))
    await _ttft_attrs(small, qs[:1])  # some session came first (this one, or an earlier test's)
    first, second = await _ttft_attrs(small, qs)
    # The system prompt's keys and values come from the process-wide prefix cache ...
    assert first["shared"] == head > 0 and first["reused"] == 0
    assert first["prefilled"] == first["prompt_tokens"] - head
    # What is left runs in the decoder's own pass when it fits one chunk (else chunked,
    # the decoder running the last token).
    chunk = small.llm.prefill_chunk
    want = 0 if first["prefilled"] <= chunk else -(-(first["prefilled"] - 1) // chunk)
    assert first["prefill_chunks"] == want
    # ... and the next turn finds the whole last prompt (and its reply) in the session's cache.
    assert second["shared"] == 0 and second["reused"] > first["prompt_tokens"]
    assert second["prefilled"] == second["prompt_tokens"] - second["reused"]

    off = dataclasses.replace(small, llm=dataclasses.replace(small.llm, prefix_cache=False))
    (cold,) = await _ttft_attrs(off, qs[:1])
    assert cold["prompt_tokens"] == first["prompt_tokens"]
    assert cold["prefilled"] == cold["prompt_tokens"] and cold["shared"] == 0


async def test_a_cancelled_reply_stops_its_prefill_after_the_current_chunk(cfg, engine) -> None:
    chunked = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, prefill_chunk=8))
    eng = engine.fork()
    stage = LlmStage(chunked, eng)
    long_text = " ".join(f"Item {i} of the list is a red box." for i in range(60))
    ids = stage.backend.prompt(long_text)
    loop = asyncio.get_running_loop()
    two = asyncio.Event()
    calls = 0
    step = stage.backend.step

    def counted(gen):
        nonlocal calls
        out = step(gen)
        calls += 1
        if calls == 2:
            loop.call_soon_threadsafe(two.set)
        return out

    stage.backend.step = counted
    p0 = eng.target.prefilled
    task = asyncio.create_task(stage.reply(1, long_text))
    await two.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with stage.backend.lock:  # a chunk already in its worker thread finishes first
        fed = eng.target.prefilled - p0
        held = eng.target.fed == ids[: eng.target.length]
    # Whole chunks only, far from the whole prompt: the prefill stopped between thread hops.
    assert 8 <= fed <= 8 * 4 and fed % 8 == 0 and len(ids) > 400
    assert held  # the cache holds exactly the tokens fed


async def test_interrupt_stops_generation_at_once(cfg, engine) -> None:
    stage = LlmStage(cfg, engine.fork())
    sent = {"interrupt": False}

    first_delta = asyncio.Event()

    async def interrupt_after_first_delta() -> None:
        await first_delta.wait()
        sent["interrupt"] = True
        await stage.put(Interrupt(turn_id=2))

    def until(f: Frame, got: list[Frame]) -> bool:
        if isinstance(f, TextDelta):
            first_delta.set()
        return isinstance(f, Interrupt)

    task = asyncio.create_task(interrupt_after_first_delta())
    prompt = "Write a long story about a dragon who learns to bake bread."
    got = await _run(stage, [TranscriptFinal(turn_id=1, text=prompt)], until)
    await task
    i = next(i for i, f in enumerate(got) if isinstance(f, Interrupt))
    after = got[i + 1 :]
    assert not any(isinstance(f, (TextDelta, TextChunk)) and f.turn_id == 1 for f in after)
    assert not any(isinstance(f, TextChunk) and f.last for f in got)  # the reply never finished
    # Memory keeps only what was handed to the TTS (maybe nothing) for the interrupted reply.
    spoken = " ".join(f.text for f in got if isinstance(f, TextChunk))
    assert stage.messages[-1] == {"role": "assistant", "content": spoken}


async def test_set_heard_rewrites_a_cut_off_reply(cfg) -> None:
    stage = LlmStage(cfg, engine=object())  # no model needed: conversation bookkeeping only
    stage.conversation.remember(
        Reply(3, "hi", 0, stage.push, spoken=["Hello there,", "how are you today?"])
    )
    assert stage.set_heard(3, "Hello there,")
    assert stage.messages[-1] == {"role": "assistant", "content": "Hello there,"}
    assert not stage.set_heard(4, "nothing")


class _WordTokenizer:
    """One token per word plus four per message: enough to exercise the context budget."""

    def chat_ids(self, messages: list[dict[str, str]]) -> list[int]:
        return [0] * sum(len(m["content"].split()) + 4 for m in messages)


async def test_set_heard_finds_its_turn_after_old_turns_were_dropped(cfg) -> None:
    # A tiny context window: every new turn makes _prompt() forget the oldest ones, which
    # shifts message indices; set_heard must still rewrite the right reply (or none).
    small = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, max_new_tokens=8))
    engine = SimpleNamespace(target=SimpleNamespace(max_len=120), tokenizer=_WordTokenizer())
    stage = LlmStage(small, engine)  # budget: 104 prompt tokens, about three turns
    for turn in range(1, 6):
        stage.conversation.remember(
            Reply(
                turn,
                f"question number {turn} " * 3,
                0,
                stage.push,
                spoken=[f"answer number {turn} " * 3],
            )
        )
        stage.backend.prompt("and another one?")
    kept = [m["content"] for m in stage.messages if m["role"] == "assistant"]
    assert 0 < len(kept) < 5
    roles = [m["role"] for m in stage.messages]
    assert roles == ["system"] + ["user", "assistant"] * len(kept)  # whole turns dropped
    assert not stage.set_heard(1, "gone")  # dropped from the window
    assert stage.set_heard(5, "answer number 5")
    assert [m["content"] for m in stage.messages if m["role"] == "assistant"][-1] == (
        "answer number 5"
    )
    assert all("gone" not in m["content"] for m in stage.messages)


# ---------------------------------------------------------------- preemptive generation


async def _until(cond, timeout: float = 300.0) -> None:
    async def poll() -> None:
        while not cond():  # noqa: ASYNC110 - polls the stage's state, no event to wait on
            await asyncio.sleep(0.005)

    await asyncio.wait_for(poll(), timeout)


def _reply(got: list[Frame], turn: int) -> tuple[str, list[str]]:
    deltas = "".join(f.text for f in got if isinstance(f, TextDelta) and f.turn_id == turn)
    chunks = [f.text for f in got if isinstance(f, TextChunk) and f.turn_id == turn]
    return deltas, chunks


def _last_chunk(turn: int):
    return lambda f, got: isinstance(f, TextChunk) and f.last and f.turn_id == turn


def _holds(stage: LlmStage, kind: type) -> bool:
    r = stage.preempter.tentative
    return r is not None and r.held is not None and any(isinstance(f, kind) for f in r.held)


@pytest.fixture(scope="module")
def cfg_off(cfg) -> Config:
    return dataclasses.replace(cfg, turns=dataclasses.replace(cfg.turns, preempt=False))


async def test_preempted_reply_is_held_until_the_final_agrees_then_identical(
    cfg, cfg_off, engine
) -> None:
    q = "What is the capital of France?"
    ref = await _run(
        LlmStage(cfg_off, engine.fork()), [TranscriptFinal(turn_id=1, text=q)], _last_chunk(1)
    )
    stage = LlmStage(cfg, engine.fork())
    got, done, task = _start(stage, _last_chunk(1))
    await stage.put(TranscriptStable(turn_id=1, text=q))
    await _until(lambda: _holds(stage, TextChunk))  # a clause is ready, the final is not
    assert not any(isinstance(f, (TextDelta, TextChunk, MetricsFrame)) for f in got)
    assert not [f for f in got if isinstance(f, SpanFrame) and f.name != "turns.p_end"]
    assert [m["role"] for m in stage.messages] == ["system"]
    await stage.put(TranscriptFinal(turn_id=1, text=q))
    await asyncio.wait_for(done.wait(), 300)
    await _end(stage, task)

    assert _reply(got, 1) == _reply(ref, 1)  # the same reply as without preemption
    assert "Paris" in _reply(got, 1)[0]
    first_out = next(i for i, f in enumerate(got) if isinstance(f, (TextDelta, TextChunk)))
    assert isinstance(got[first_out - 1], (TranscriptFinal, SpanFrame, MetricsFrame))
    assert any(isinstance(f, TranscriptFinal) for f in got[:first_out])
    spans = {f.name: f for f in got if isinstance(f, SpanFrame) and f.name.startswith("llm.")}
    assert {"llm.ttft", "llm.first_chunk", "llm.tpot"} <= set(spans)
    assert all(s.attrs["preempt"] == "kept" for s in spans.values())
    assert spans["llm.ttft"].attrs["ahead_ms"] > 0  # it started before the final arrived
    (kept,) = [f for f in got if isinstance(f, MetricsFrame) and f.source == "preempt"]
    assert kept.values["kept"] == 1
    assert stage.messages[1:] == [
        {"role": "user", "content": q},
        {"role": "assistant", "content": " ".join(_reply(ref, 1)[1]).strip()},
    ]
    assert (stage.preempter.policy.kept, stage.preempter.policy.cancelled) == (1, 0)


async def test_a_differing_final_cancels_the_tentative_reply_cleanly(cfg, cfg_off, engine) -> None:
    final = "What is two plus three?"
    ref = await _run(
        LlmStage(cfg_off, engine.fork()), [TranscriptFinal(turn_id=1, text=final)], _last_chunk(1)
    )
    stage = LlmStage(cfg, engine.fork())
    got, done, task = _start(stage, _last_chunk(1))
    await stage.put(TranscriptStable(turn_id=1, text="Tell me a long story about a dragon"))
    await _until(lambda: _holds(stage, TextDelta))  # mid-reply: its KV cache holds the story
    await stage.put(TranscriptFinal(turn_id=1, text=final))
    await asyncio.wait_for(done.wait(), 300)
    await _end(stage, task)

    # Not one word of the dropped reply went out, and the answer to the final is exactly the
    # one a stage that never preempted gives (the engine's KV cache kept nothing stale).
    assert _reply(got, 1) == _reply(ref, 1)
    ttft = [f for f in got if isinstance(f, SpanFrame) and f.name == "llm.ttft"]
    assert len(ttft) == 1 and ttft[0].attrs["preempt"] == "cancelled"
    (cancelled,) = [f for f in got if isinstance(f, MetricsFrame) and f.source == "preempt"]
    assert cancelled.values["cancelled"] == 1
    assert [m["content"] for m in stage.messages[1:]] == [
        final,
        " ".join(_reply(ref, 1)[1]).strip(),
    ]
    assert (stage.preempter.policy.kept, stage.preempter.policy.cancelled) == (0, 1)


async def test_speech_resumed_or_a_barge_in_drop_the_tentative_reply(cfg, engine) -> None:
    stage = LlmStage(cfg, engine.fork())
    got, _, task = _start(stage)
    await stage.put(TranscriptStable(turn_id=1, text="Tell me"))
    await _until(lambda: _holds(stage, TextDelta))
    r = stage.preempter.tentative
    await stage.put(SpeechResumed(turn_id=1))
    await _until(lambda: stage.preempter.tentative is None and r.task.done())
    await stage.put(TranscriptStable(turn_id=1, text="Tell me a joke"))
    await _until(lambda: _holds(stage, TextDelta))
    r = stage.preempter.tentative
    await stage.put(Interrupt(turn_id=2))  # the user started a new turn before the final
    await _until(lambda: stage.preempter.tentative is None and r.task.done())
    await _end(stage, task)
    assert not any(isinstance(f, (TextDelta, TextChunk)) for f in got)
    # (the only spans: each pause's estimate for the endpointer, not the reply's)
    assert {f.name for f in got if isinstance(f, SpanFrame)} == {"turns.p_end"}
    assert [m["role"] for m in stage.messages] == ["system"]  # nothing was committed
    assert (stage.preempter.policy.kept, stage.preempter.policy.cancelled) == (0, 2)
    outcomes = [f.values for f in got if isinstance(f, MetricsFrame) and f.source == "preempt"]
    assert outcomes == [{"cancelled": 1}, {"cancelled": 1}]


class _BrokenDecoder:
    """A decoder whose model fails on its first step (e.g. out of memory)."""

    metrics = SimpleNamespace(as_dict=lambda: {})

    def generate(self, ids, max_new, stop):
        raise RuntimeError("model failed")
        yield


async def test_a_failed_tentative_reply_that_is_cancelled_does_not_end_the_session(cfg) -> None:
    tok = _WordTokenizer()
    tok.stop_ids = ()
    engine = SimpleNamespace(
        target=SimpleNamespace(max_len=512), tokenizer=tok, decoder=lambda: _BrokenDecoder()
    )
    stage = LlmStage(cfg, engine)
    got, _, task = _start(stage)
    await stage.put(TranscriptStable(turn_id=1, text="Hello"))
    await _until(
        lambda: stage.preempter.tentative is not None and stage.preempter.tentative.task.done()
    )
    await stage.put(SpeechResumed(turn_id=1))  # the failure is logged, the stage goes on
    await _until(lambda: stage.preempter.tentative is None)
    await _end(stage, task, 30)
    assert [f.values for f in got if isinstance(f, MetricsFrame)] == [{"cancelled": 1}]
    assert [m["role"] for m in stage.messages] == ["system"]


async def test_the_engine_a_stage_built_goes_when_it_stops(cfg, engine) -> None:
    """Its fork's KV cache (~95 MB) must not wait for whoever still holds the stage."""
    caches = {}

    def until(f: Frame, got: list[Frame]) -> bool:  # the stage is running: note its cache
        caches.setdefault(stage, weakref.ref(stage.engine.target.cache))
        return isinstance(f, TextChunk) and f.last

    own = LlmStage(cfg)  # builds its fork in start()
    given = LlmStage(cfg, engine.fork())  # the caller's: left alone
    gc.disable()  # reference counting alone must free it
    try:
        for stage in (own, given):
            await _run(stage, [TranscriptFinal(turn_id=1, text="Hi there.")], until)
        assert own.engine is None and caches[own]() is None
        assert given.engine is not None and caches[given]() is not None
    finally:
        gc.enable()


async def test_tools_are_off_cleanly_where_the_template_has_none(cfg, engine) -> None:
    # SmolLM2's chat template renders no tools: [tools] on or not, the stage runs as
    # before (its system prompt, no tool block, no call splitting).
    assert cfg.tools.enabled and not engine.tokenizer.supports_tools
    stage = LlmStage(cfg, engine.fork())
    assert stage.tools is None
    assert stage.messages == [{"role": "system", "content": cfg.llm.system_prompt}]
    got = await _run(
        stage,
        [TranscriptFinal(turn_id=1, text="What time is it?")],
        lambda f, got: isinstance(f, TextChunk) and f.last,
    )
    assert not [f for f in got if isinstance(f, SpanFrame) and f.name == "llm.tool"]


def test_sessions_fork_one_base_engine(cfg) -> None:
    """engine_for per session: shared weights and tokenizer, caches of its own (the base
    engine is built once per process, not per client that says hello)."""
    a, b = engine_for(cfg), engine_for(cfg)
    assert a.model is b.model and a.tokenizer is b.tokenizer
    assert a.target is not b.target and a.target.cache is not b.target.cache
