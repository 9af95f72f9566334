"""The LLM behind ``/v1/chat/completions``: voicepipe's own speculative engine.

One engine fork (``stages.llm.engine_for``: the process-wide weights every
session shares, with caches of its own) serves the HTTP API, one request at a
time: two cores gain nothing from decoding two prompts at once, and a client
that sends its growing conversation turn after turn (a voice pipeline using
this server as its LLM) has all but the newest turn in the KV cache already.
Requests wait their turn in order; beyond ``max_waiting`` they are refused
(429) rather than queued without bound. Generation runs one decoder step per
worker-thread hop, like the LLM stage, so the event loop (and every voice
session on it) keeps running; a client that hangs up stops its request after
the current step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.wire.openai_chat import ApiError, ChatRequest, StopScanner
from voicepipe.stages.llm.voice_first import VoiceFirst

_DONE = object()
PROMPT_MARGIN = 8  # positions kept free past the reply (as the LLM stage does)


@dataclass
class Finished:
    """The end of one completion: why, token counts, and voicepipe's own figures."""

    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class Job:
    request: ChatRequest
    ids: list[int]
    max_new: int


class ChatEngine:
    def __init__(
        self, cfg: Config, max_waiting: int, voice_first: VoiceFirst | None = None
    ) -> None:
        self.voice_first = voice_first  # None: no priority for voice turns
        self.cfg = cfg
        self.max_waiting = max_waiting
        self.model_id = cfg.llm.model
        self._engine: Any = None
        self._load_lock = asyncio.Lock()
        self._turn = asyncio.Lock()  # one request generates at a time
        self._step_lock = threading.Lock()  # and one model pass, even after a cancel
        self.waiting = 0

    async def _load(self) -> Any:
        async with self._load_lock:
            if self._engine is None:
                from voicepipe.stages.llm.engine import engine_for

                self._engine = await asyncio.to_thread(engine_for, self.cfg)
        return self._engine

    async def prepare(self, req: ChatRequest) -> Job:
        """The prompt's tokens and the reply's budget; ApiError if it cannot fit."""
        eng = await self._load()
        ids = eng.tokenizer.chat_ids(req.chat_messages())
        room = eng.target.max_len - len(ids) - PROMPT_MARGIN
        if room < 1:
            raise ApiError(
                400,
                f"This model's maximum context length is {eng.target.max_len} tokens; the "
                f"messages take {len(ids)}.",
                param="messages",
                code="context_length_exceeded",
            )
        return Job(req, ids, min(req.max_tokens or self.cfg.llm.max_new_tokens, room))

    async def _api_step(self, gen: Iterator[Any]) -> Any:
        """One step on a worker thread, then the pause voice turns are owed (if any)."""
        if self.voice_first is not None:
            await self.voice_first.before_step()
        t0 = now_ns()
        step = await asyncio.to_thread(self._step, gen)
        if self.voice_first is not None:
            await self.voice_first.after_step((now_ns() - t0) / 1e9)
        return step

    def _step(self, gen: Iterator[Any]) -> Any:
        with self._step_lock:
            return next(gen, _DONE)

    def _sampled(self, eng: Any, req: ChatRequest) -> Any:
        """The engine with the request's sampling (same caches), or as configured."""
        from voicepipe.speculative.sampling import SamplingParams

        c = self.cfg.llm
        sp = SamplingParams(
            c.temperature if req.temperature is None else req.temperature,
            c.top_k,
            c.top_p if req.top_p is None else req.top_p,
            c.seed if req.seed is None else req.seed,
        )
        return eng if sp == eng.sampling else dataclasses.replace(eng, sampling=sp)

    def check_capacity(self) -> None:
        """ApiError 429 when ``max_waiting`` requests already wait for the model."""
        if self.waiting >= self.max_waiting:
            raise ApiError(
                429,
                f"{self.waiting} requests are waiting for the model; retry shortly",
                type="rate_limit_error",
                code="rate_limit_exceeded",
            )

    async def run(self, job: Job) -> AsyncIterator[str | Finished]:
        """Text deltas, then one ``Finished``. Waits for the requests before it."""
        self.waiting += 1
        try:
            await self._turn.acquire()
        finally:
            self.waiting -= 1
        try:
            async for item in self._generate(job):
                yield item
        finally:
            self._turn.release()

    async def _generate(self, job: Job) -> AsyncIterator[str | Finished]:
        from voicepipe.nn.llm.tokenizer import StreamDecoder

        eng = self._sampled(await self._load(), job.request)
        target = eng.target
        counts0 = (target.prefilled, target.shared)
        t0 = now_ns()
        chunk = self.cfg.llm.prefill_chunk
        if chunk > 0:  # long prompts in short model passes: other sessions' steps between
            feed = eng.feed(job.ids, chunk)
            while await self._api_step(feed) is not _DONE:
                pass
        stop_ids = eng.tokenizer.stop_ids
        dec = eng.decoder()
        gen = dec.generate(job.ids, job.max_new, stop_ids)
        stream = StreamDecoder(eng.tokenizer)
        scanner = StopScanner(job.request.stop)
        finish, n_tokens, first_ns = "length", 0, 0
        while finish == "length":
            step = await self._api_step(gen)
            if step is _DONE:
                break
            if not first_ns:
                first_ns = now_ns()
            if step and step[-1] in stop_ids:
                step, finish = step[:-1], "stop"
            n_tokens += len(step)
            text, hit = scanner.push("".join(stream.push(t) for t in step))
            if hit:
                finish = "stop"
            elif finish == "stop":
                text += scanner.flush()
            if text:
                yield text
        if finish == "length" and (rest := scanner.flush()):
            yield rest
        end_ns = now_ns()
        prefilled = target.prefilled - counts0[0]
        shared = target.shared - counts0[1]
        decode_s = (end_ns - first_ns) / 1e9 if first_ns else 0.0
        stats = {
            "ttft_ms": round((first_ns - t0) / 1e6, 3) if first_ns else None,
            "decode_tokens_per_s": round((n_tokens - 1) / decode_s, 2) if decode_s > 0 else None,
            "prompt": {
                "prefilled": prefilled,  # run through the model for this request
                "shared": shared,  # copied from the process-wide prefix cache
                "reused": len(job.ids) - prefilled - shared,  # still in this engine's cache
            },
            "speculation": dec.metrics.as_dict(),
        }
        yield Finished(finish, len(job.ids), n_tokens, stats)
