"""The LLM batch scheduler's shell: one model per process, every session's steps batched.

With ``llm.batching = true`` a session's reply no longer runs its own model passes on
the default executor's threads: its prompt chunks and decoder (``SpeculativeDecoder
.steps``) go to the process's ``Batcher`` for that model, one worker thread that
repeats, while any session has work:

1. plan the step (voicepipe/core/batching.py: who decodes, which prompt gets a chunk,
   the speculation cap),
2. run that prompt chunk, and advance each decoding session to its next verify call
   (its proposer drafts here),
3. run every session's verify rows in one model pass (voicepipe/nn/llm/batched.py),
4. hand each session its step's tokens (its asyncio side wakes up).

Sessions join and leave between steps (continuous batching). A barge-in cancels the
waiting coroutine; its job is marked cancelled and dropped before the next step (the
step in flight finishes first, as on the per-session path), and its generator is
closed on the worker thread, the only thread that touches a session's caches while
it has a job.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from voicepipe.core.batching import BatchPolicy
from voicepipe.schedulers.jobs import DONE, Job
from voicepipe.speculative.loop import ForceCall, PrefillCall, ScoreCall, SpeculativeDecoder


class _Feed(Job):
    """A prompt's chunks: rows of the batched passes (``chunks``), or, where the engine
    has caches of another model too (a GGUF draft), ``Engine.feed``'s own passes."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        gen: Iterator[int] | None,
        chunks: Any = None,
        background: bool = False,
    ) -> None:
        super().__init__(loop)
        self.gen = gen
        self.chunks = chunks  # Iterator[voicepipe.nn.llm.batched.Pass] | None
        self.background = background  # fed only in steps with nothing else to run


class _Decode(Job):
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        dec: SpeculativeDecoder,
        prompt: list[int],
        max_new: int,
        stop: frozenset[int] | set[int],
    ) -> None:
        super().__init__(loop)
        self.dec = dec
        self.gen = dec.steps(prompt, max_new, stop)
        # Its next model call (its prompt's last rows, then verify calls), for the next pass.
        self.call: ScoreCall | PrefillCall | ForceCall | None = None


class Batcher:
    """The process's scheduler for one model (``batcher_for``)."""

    def __init__(self, model: Any, k_max: int = 8) -> None:
        self.model = model
        self.policy = BatchPolicy(k_max=k_max)
        self._jobs: dict[int, Job] = {}
        self._new: deque[Job] = deque()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self.steps = 0  # batched passes run (and their rows): for tests and metrics
        self.rows = 0
        self.max_batch = 0
        self.k_caps: dict[str, int] = {}  # passes per speculation cap ("none": not capped)

    # ------------------------------------------------------------ asyncio side

    def feed(self, engine: Any, tokens: list[int], chunk: int, background: bool = False) -> Job:
        """Prefill a prompt (``Engine.feed``) one chunk per step, the chunk's rows in the
        same pass as the other sessions' decode rows; the job yields each chunk's size.
        ``background``: a chunk only in steps where nobody decodes and no other prompt
        waits (the streaming prefill of words still being spoken)."""
        loop = asyncio.get_running_loop()
        targets: list[Any] = getattr(engine, "_targets", lambda: [])()
        if targets == [engine.target] and engine.target.model is self.model:
            from voicepipe.nn.llm.batched import feed_chunks

            chunks = feed_chunks(engine.target, tokens, chunk)
            return self._submit(_Feed(loop, None, chunks, background))
        return self._submit(_Feed(loop, engine.feed(tokens, chunk), None, background))

    def decode(
        self,
        dec: SpeculativeDecoder,
        prompt: list[int],
        max_new: int,
        stop: frozenset[int] | set[int],
    ) -> Job:
        """A reply's steps batched with the other sessions'; the job yields each step's
        tokens as ``SpeculativeDecoder.generate`` would."""
        return self._submit(_Decode(asyncio.get_running_loop(), dec, prompt, max_new, stop))

    def _submit(self, job: Job) -> Job:
        with self._cv:
            self._new.append(job)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="llm-batch", daemon=True)
                self._thread.start()
            self._cv.notify()
        return job

    # ------------------------------------------------------------ worker

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._new and not self._jobs:
                    if not self._cv.wait(timeout=30.0) and not self._new and not self._jobs:
                        self._thread = None  # idle: the next submit starts a new worker
                        return
                while self._new:
                    job = self._new.popleft()
                    self._jobs[job.id] = job
                    if isinstance(job, _Feed):
                        self.policy.join_prefill(job.id, job.background)
                    else:
                        self.policy.join_decode(job.id)
            try:
                self._step()
            except Exception as e:
                for job in list(self._jobs.values()):
                    self._finish(job, e)

    def _finish(self, job: Job, item: Any = DONE) -> None:
        job.finished = True
        self.policy.leave(job.id)
        self._jobs.pop(job.id, None)
        close = getattr(getattr(job, "gen", None), "close", None)
        if close is not None:  # (a generator's finally blocks run here, on this thread)
            close()
        job.deliver(item)

    def _step(self) -> None:
        for job in list(self._jobs.values()):  # barge-ins since the last step
            if job.cancelled:
                self._finish(job)
        # New decode jobs: run to their first model call (their prompt's last token); they
        # join this step's pass.
        for job in list(self._jobs.values()):
            if isinstance(job, _Decode) and job.call is None and not job.finished:
                self._advance(job, None)
        plan = self.policy.plan()
        from voicepipe.nn.llm.batched import Pass, score_batch

        passes: list[Pass] = []
        owners: list[Job] = []
        for sid in plan.prefill:
            feed = self._jobs.get(sid)
            if not isinstance(feed, _Feed):
                continue
            try:
                if feed.chunks is None:  # its own passes (caches of another model too)
                    assert feed.gen is not None
                    feed.deliver(next(feed.gen))
                else:  # a chunk of rows in this step's pass
                    passes.append(next(feed.chunks))
                    owners.append(feed)
            except StopIteration:
                self._finish(feed)
            except Exception as e:
                self._finish(feed, e)
        batch = [j for sid in plan.decode if isinstance(j := self._jobs.get(sid), _Decode)]
        for j in batch:
            c, t = j.call, j.dec.target
            if isinstance(c, PrefillCall):
                passes.append(Pass.prefill(t, c.tokens))  # type: ignore[arg-type]
                owners.append(j)
            elif isinstance(c, ForceCall):  # (its rows scored like drafts: the last one read)
                passes.append(Pass(t, c.tokens, None))  # type: ignore[arg-type]
                owners.append(j)
            elif c is not None:
                passes.append(Pass(t, c.tokens, c.parents))  # type: ignore[arg-type]
                owners.append(j)
        if not passes:
            return
        rows = sum(len(p.tokens) for p in passes)
        t0 = time.perf_counter()
        try:
            scores = score_batch(self.model, passes)
        except Exception as e:
            for j in owners:
                self._finish(j, e)
            return
        if not any(isinstance(j, _Feed) for j in owners):  # (prompt rows cost differently:
            self.policy.observe_step(rows, time.perf_counter() - t0)  # the fit is decode's)
        self.steps += 1
        self.rows += rows
        self.max_batch = max(self.max_batch, len(owners))
        cap = "none" if plan.k_cap is None else str(plan.k_cap)
        self.k_caps[cap] = self.k_caps.get(cap, 0) + 1
        for j, p, s in zip(owners, passes, scores, strict=True):
            if isinstance(j, _Feed):
                j.deliver(len(p.tokens))
                continue
            assert isinstance(j, _Decode)
            reply = s.logits[0] if isinstance(j.call, PrefillCall) else s
            j.call = None
            self._advance(j, reply, plan.k_cap)

    def _advance(self, job: _Decode, reply: Any, k_cap: int | None = None) -> None:
        """Send ``reply`` into the job's generator and run it to its next model call,
        delivering the tokens it emits on the way."""
        try:
            while True:
                job.dec.k_cap = k_cap
                m = job.dec.metrics
                drafted, accepted = m.drafted, m.accepted
                t0 = time.perf_counter()
                item = job.gen.send(reply)
                if isinstance(item, (ScoreCall, PrefillCall, ForceCall)):
                    job.call = item
                    if isinstance(item, ScoreCall) and reply is None and len(item.tokens) > 1:
                        drafts = len(item.tokens) - 1  # it resumed into its proposal
                        self.policy.observe_draft_time(drafts, time.perf_counter() - t0)
                    return
                m = job.dec.metrics
                if m.drafted > drafted:  # the step just verified: its drafts' outcome
                    self.policy.observe_drafts(m.drafted - drafted, m.accepted - accepted)
                reply = None
                job.deliver(item)
        except StopIteration:
            self._finish(job)
        except Exception as e:
            self._finish(job, e)


_BATCHERS: dict[int, tuple[Any, Batcher]] = {}
_LOCK = threading.Lock()


def batcher_for(engine: Any) -> Batcher:
    """The process's batcher for ``engine``'s model (every fork of it shares one)."""
    model = engine.target.model
    with _LOCK:
        got = _BATCHERS.get(id(model))
        if got is None or got[0] is not model:
            got = _BATCHERS[id(model)] = (model, Batcher(model, k_max=getattr(engine, "k_max", 8)))
        return got[1]


class Steps:
    """A reply's decode steps for the LLM stage: through the batcher when there is one,
    else ``generate``'s steps one thread hop each under the session's lock."""

    def __init__(
        self,
        batcher: Batcher | None,
        dec: SpeculativeDecoder,
        prompt: list[int],
        max_new: int,
        stop: frozenset[int] | set[int],
        lock: threading.Lock,
    ) -> None:
        self.lock = lock
        self.job = batcher.decode(dec, prompt, max_new, stop) if batcher else None
        self.gen = None if batcher else dec.generate(prompt, max_new, stop)

    async def next(self) -> list[int] | None:
        """The next step's tokens; None when the reply is done."""
        if self.job is not None:
            item = await self.job.next()
            return None if item is DONE else item  # type: ignore[no-any-return]
        return await asyncio.to_thread(self._step)

    def _step(self) -> list[int] | None:
        with self.lock:
            assert self.gen is not None
            return next(self.gen, None)

    def close(self) -> None:
        if self.job is not None:
            self.job.cancel()


async def prefill(
    batcher: Batcher, engine: Any, tokens: list[int], chunk: int, background: bool = False
) -> int:
    """Prefill ``tokens`` (all but the last, as ``Engine.feed``) in the batcher; returns the
    chunks run (an Interrupt cancelling this coroutine stops them after the chunk in
    flight). ``background``: see ``Batcher.feed``."""
    job = batcher.feed(engine, tokens, chunk, background)
    n = 0
    try:
        while await job.next() is not DONE:
            n += 1
    finally:
        job.cancel()
    return n
