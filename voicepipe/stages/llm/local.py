"""The LLM stage's in-process engine (``llm.backend = "local"``): a fork of the process's
GGUF engine (stages/llm/engine.py), the prompt, chunked prefill, speculative decoding one
step per thread hop (or in the process's batch scheduler, schedulers/llm_batch.py), and
tool rounds.

Each session keeps its own KV cache (the weights are shared by every session in the
process); a new turn only prefills what the cache does not already hold (the previous
prompt and the reply generated to it stay there), a new session copies the rendered
system prompt's keys and values from a process-wide prefix cache (``llm.prefix_cache``,
voicepipe/nn/llm/prefix.py), and what is left is prefilled ``llm.prefill_chunk`` tokens
per thread hop. With ``llm.batching`` the prompt's chunks and the decoder's steps run in
the process's batch scheduler instead: one pass for every session's rows. ``llm.ttft``
says where the prompt's tokens came from: ``prefilled`` (run through the model this turn,
in ``prefill_chunks`` chunked passes plus the decoder's last token), ``shared`` (prefix
cache), ``reused`` (session cache).

Tools (``[tools]``, docs/TOOLS.md; on where the chat template renders them): the tools
block is part of the prefix-cached system prefix; the reply's text passes through a
``core.tools.CallSplitter``, so a call's tags and JSON never reach the deltas, the chunker
or the TTS. When the model stops after calls they run (stages/llm/tools.py), the call and
the results join the prompt, and decoding goes on into the spoken answer (at most
``tools.max_rounds`` rounds). Span ``llm.tool``: first token of a round's calls → first
token after their results. A tentative reply runs no tool before the final transcript
confirms it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.recital import RecitalGuard
from voicepipe.core.text.chunker import Chunker
from voicepipe.core.tool_xml import schema_types
from voicepipe.core.tools import FORCED_CALL, BadCall, CallSplitter, Speech, ToolCall
from voicepipe.nn.threads import BUDGET
from voicepipe.schedulers.llm_batch import Batcher, Steps, batcher_for
from voicepipe.schedulers.llm_batch import prefill as batched_prefill
from voicepipe.speculative.metrics import SpecMetrics
from voicepipe.stages.llm.context import Conversation, Message
from voicepipe.stages.llm.engine import engine_for, system_prefix
from voicepipe.stages.llm.reply import Reply
from voicepipe.stages.llm.tools import (
    Round,
    SessionTools,
    client_calls,
    jump_forcer,
    run_round,
    system_prompt,
    tag_ids,
    use_skeletons,
)
from voicepipe.tools import Toolbox

DONE = object()  # a prefill generator's end


class LocalEngine:
    """The model in this process, for one session (``engine``: a fork the caller gives, or
    None: one is built in ``start`` and released in ``stop``)."""

    def __init__(self, cfg: Config, engine: Any, conv: Conversation, tools: SessionTools) -> None:
        self.cfg = cfg
        self.engine = engine
        self.conv = conv
        self.tools = tools
        self.owns_engine = engine is None  # built in start(): released in stop()
        # One model pass at a time per session, even when a cancelled step is still running.
        self.lock = threading.Lock()
        if engine is not None:
            tools.setup(getattr(engine, "tokenizer", None), conv)

    async def start(self) -> None:
        if self.engine is None:
            self.engine = await asyncio.to_thread(engine_for, self.cfg)
            self.tools.setup(getattr(self.engine, "tokenizer", None), self.conv)
        elif hasattr(self.engine, "share_prefix"):  # an engine given: its caches may be cold
            await asyncio.to_thread(self._share_prefix)

    def _share_prefix(self) -> None:
        eng = self.engine
        sys_prompt = self.conv.messages[0]["content"] if self.conv.messages else ""
        with self.lock:
            eng.share_prefix(system_prefix(eng.tokenizer, sys_prompt, self.conv.specs))

    async def stop(self) -> None:
        if self.owns_engine:
            # The fork's KV caches (~95 MB) go now, whoever still holds this stage (a
            # traceback, a test): a finished session must not keep them until a full GC.
            self.engine = None

    def prompt(
        self, user_text: str, extra: list[Message] | None = None, tools: bool = True
    ) -> list[int]:
        """The prompt's token ids: the conversation, ``user_text`` and ``extra`` (this
        reply's tool round so far), within the cache's length less the reply's budget.
        ``tools=False``: no tools block, and the tools' system prompt (if in force) is
        ``llm.system_prompt``, the one that says there are none."""
        eng = self.engine
        budget = eng.target.max_len - self.conv.max_new_tokens - 8
        kw = {"tools": self.conv.specs} if self.conv.specs and tools else {}
        with_tools = system_prompt(self.cfg, self.tools.box)  # (the one in force, if ours)

        def render(msgs: list[Message]) -> list[int]:
            if not tools and msgs and msgs[0] == {"role": "system", "content": with_tools}:
                msgs = [{"role": "system", "content": system_prompt(self.cfg, None)}, *msgs[1:]]
            return eng.tokenizer.chat_ids(msgs, **kw)  # type: ignore[no-any-return]

        return self.conv.fit(render, budget, user_text, extra)

    def step(self, gen: Iterator[list[int]]) -> object:
        with self.lock:
            return next(gen, DONE)

    async def _prefill(self, ids: list[int]) -> int:
        """Prefill what the caches lack of the prompt, ``llm.prefill_chunk`` tokens per thread
        hop, so a long prompt is many short steps: other sessions' steps get the worker
        threads and the cores in between, and an Interrupt stops it after the current
        chunk. Returns the model passes run (the decoder's own prefill then runs one token)."""
        chunk = self.cfg.llm.prefill_chunk
        if chunk <= 0 or not hasattr(self.engine, "feed"):
            return 0
        target = getattr(self.engine, "target", None)
        if target is not None and hasattr(target, "reusable"):

            def lack() -> int:  # (the prefix cache's rows, if any, are copied in here)
                with self.lock:
                    return len(ids) - int(target.reusable(ids))

            if await asyncio.to_thread(lack) <= chunk:
                # What is left fits one pass (after the streaming prefill: the pause's last
                # words and the assistant header): the decoder's own prefill runs it all.
                # Fed here it would leave the decoder its last token: a second pass.
                return 0
        batcher = self._batcher()
        if batcher is not None:
            return await batched_prefill(batcher, self.engine, ids, chunk)
        gen = self.engine.feed(ids, chunk)
        n = 0
        while await asyncio.to_thread(self.step, gen) is not DONE:
            n += 1
        return n

    def _batcher(self) -> Batcher | None:
        """The process's batch scheduler for this model (``llm.batching``), else None."""
        if not self.cfg.llm.batching or not hasattr(getattr(self.engine, "target", None), "model"):
            return None
        return batcher_for(self.engine)

    async def generate(self, r: Reply) -> None:
        from voicepipe.nn.llm.tokenizer import StreamDecoder

        eng = self.engine
        assert eng is not None
        conv = self.conv
        ids = self.prompt(r.text)
        target = getattr(eng, "target", None)
        counts0 = (getattr(target, "prefilled", 0), getattr(target, "shared", 0))
        # model passes of this reply, and those that ran on one thread for want of a core
        passes0 = (getattr(target, "passes", 0), getattr(target, "narrowed", 0))
        chunks = await self._prefill(ids)
        stop = eng.tokenizer.stop_ids
        keep = tag_ids(eng.tokenizer) if conv.specs else frozenset()
        chunker = Chunker(
            first_min_words=self.cfg.llm.first_min_words,
            first_break_words=self.cfg.llm.first_break_words,
        )
        first_tok_ns = last_tok_ns = 0
        n_tokens = 0
        tool_ns = 0  # time in tool rounds: not decode time (llm.tpot)
        rounds = 0
        rnd: Round | None = None  # the round whose answer's first token ends llm.tool
        forced = ""  # a call's opening, put in the model's mouth (see below)
        call_ns = 0
        # (the tools of this reply: a response's own may differ from the session's)
        use_skeletons(eng, conv.specs if self.cfg.llm.tool_skeleton else None)
        forcer = jump_forcer(eng, conv.specs, self.cfg.llm.tool_jump)

        def decoder() -> Any:
            d = eng.decoder()
            d.forcer = forcer  # a tool call's fixed text in one pass
            return d

        dec = decoder()
        done: list[Any] = []  # the decoders of the reply's earlier passes (tool rounds)
        specs = conv.specs  # None once a recital made the reply start again without tools
        types = schema_types(specs) if specs else None  # (XML calls are read by them)
        cut = False  # a recital after some of the reply was said: it ends there
        names = [s["function"]["name"] for s in specs or []]
        batcher = self._batcher()
        steps: Steps | None = None
        BUDGET.start_session()  # (voicepipe/nn/threads.py: other calls' thread counts)
        try:
            while True:  # one pass per tool round: the model stops after its calls
                steps = Steps(batcher, dec, ids, conv.max_new_tokens, stop, self.lock)
                stream = StreamDecoder(eng.tokenizer, keep)
                # calls never reach speech (read in XML too, by the tools' argument types)
                split = CallSplitter(types) if specs else None
                guard = (
                    RecitalGuard(names, self.cfg.llm.first_break_words)
                    if specs and self.cfg.tools.recital_guard
                    else None
                )
                said: list[str] = []  # this pass's text, spoken or not yet
                calls: list[ToolCall | BadCall] = []
                if split is not None and forced:
                    split.push(forced)
                while True:
                    step = await steps.next()
                    if step is None:
                        break
                    t = now_ns()
                    n_tokens += len(step)
                    if not first_tok_ns:
                        first_tok_ns = r.first_tok_ns = t
                        prefilled = getattr(target, "prefilled", 0) - counts0[0]
                        shared = getattr(target, "shared", 0) - counts0[1]
                        await r.span(
                            "llm.ttft", r.request_ns, t, prompt_tokens=len(ids),
                            prefilled=prefilled,  # run through the model for this turn
                            shared=shared,  # copied from the process-wide prefix cache
                            reused=len(ids) - prefilled - shared,  # held by the session's cache
                            prefill_chunks=chunks,
                        )  # fmt: skip
                    if rnd is not None:  # the first token after a tool round's results
                        tool_ns += t - rnd.started_ns
                        await r.span("llm.tool", rnd.started_ns, t, **rnd.span_attrs())
                        rnd = None
                    last_tok_ns = t
                    delta = "".join(stream.push(tok) for tok in step)
                    if not delta:
                        continue
                    if split is None:
                        events: list[Any] = [Speech(delta)]
                    else:
                        before = split.calls
                        events = split.push(delta)
                        if split.calls > before and not call_ns:
                            call_ns = t
                    if guard is not None:
                        events = guarded(guard, events)
                        if guard.recital:
                            break
                    await r.say_events(chunker, events, said, calls)
                if guard is not None and guard.recital:
                    steps.close()
                    if guard.released or rounds:
                        cut = True  # said in part: it ends with the chunks the TTS has
                        break
                    # Nothing said yet: the reply again, without tools (core/recital.py).
                    specs = None
                    ids = self.prompt(r.text, r.tool_msgs, tools=False)
                    await self._prefill(ids)
                    await r.span("llm.recital", last_tok_ns, now_ns(), tools=names)
                    done.append(dec)
                    dec = eng.decoder()
                    continue
                if split is not None:
                    tail = split.flush()
                    if guard is not None:
                        tail = [*guarded(guard, tail), Speech(guard.flush())]
                    await r.say_events(chunker, tail, said, calls)
                text = "".join(said).strip()
                if await client_calls(r, calls, text, conv.client_tool_names):
                    break  # the client runs them: this reply ends with its calls
                if not calls or rounds >= self.cfg.tools.max_rounds:
                    break  # (past max_rounds further calls are dropped: the reply ends)
                if not forced and all(isinstance(c, BadCall) and not c.raw for c in calls):
                    # Empty call tags ("<tools></tools>"): the model meant to call but
                    # wrote nothing. Told so, the 1.5B gives up; started on a call's
                    # opening, it names the tool and its arguments. Decode that pass again.
                    forced = FORCED_CALL
                    ids = ids + eng.tokenizer.encode(forced)
                    done.append(dec)
                    dec = decoder()
                    continue
                # The model asked for tools: run them, show it the results, decode on.
                rounds += 1
                rnd = Round(started_ns=call_ns or last_tok_ns)
                dm = getattr(dec, "metrics", None)
                if dm is not None:  # (the call's pass; an empty call decoded again: both)
                    for d in [*done[-1:], dec] if forced else [dec]:
                        rnd.tokens += d.metrics.tokens
                        rnd.forced += getattr(d.metrics, "forced", 0)
                        rnd.passes += d.metrics.target_passes
                call_ns, forced = 0, ""
                rnd.calls = [c for c in calls if isinstance(c, ToolCall)]
                rnd.errors = [c.error for c in calls if isinstance(c, BadCall)]
                if r.tentative:  # no side effects before the final transcript agrees
                    await r.committed.wait()
                box = self.tools.box or Toolbox()  # (only client tools: a call to no tool)
                tcfg = self.cfg.tools

                async def filler() -> None:  # said while a slow call runs (then its answer)
                    await r.say(chunker, self.cfg.tools.filler.strip() + " ")

                await run_round(
                    box, rnd, self.tools.context(), tcfg.timeout_s, filler,
                    tcfg.filler_after_ms / 1e3,
                )  # fmt: skip
                r.tool_msgs += rnd.messages(text)
                answer = rnd.spoken_answer(box, tcfg.unknown_reply, tcfg.speak_results)
                if answer is not None:
                    # The tools say their results themselves: no second model round. The
                    # conversation still holds the call, the results and this answer.
                    rnd.spoken = True
                    await r.span("llm.tool", rnd.started_ns, now_ns(), **rnd.span_attrs())
                    rnd = None
                    await r.say(chunker, answer)
                    break
                ids = self.prompt(r.text, r.tool_msgs)
                done.append(dec)
                dec = decoder()
            await r.end(chunker, rest_too=not cut)
        finally:
            BUDGET.end_session()
            if steps is not None:
                steps.close()  # (batched: leaves the batch before the next step)
            m = all_passes([*done, dec])
            if n_tokens > 1:
                decode_ns = last_tok_ns - first_tok_ns - tool_ns
                m["tpot_ms"] = round(decode_ns / 1e6 / (n_tokens - 1), 3)
                mean_ns = decode_ns // (n_tokens - 1)
                r.tpot = (
                    last_tok_ns - mean_ns, last_tok_ns,
                    {"tokens": n_tokens, "decode_ms": round(decode_ns / 1e6, 3),
                     "passes": getattr(target, "passes", 0) - passes0[0],
                     "narrowed": getattr(target, "narrowed", 0) - passes0[1]},
                )  # fmt: skip
            if rounds:
                m["tool_rounds"] = rounds
            r.metrics = m


def guarded(guard: RecitalGuard, events: list[Any]) -> list[Any]:
    """``events`` with their speech passed through ``guard`` (held text goes out before a
    call, which follows it in the reply)."""
    out: list[Any] = []
    for ev in events:
        text = guard.push(ev.text) if isinstance(ev, Speech) else guard.flush()
        if text:
            out.append(Speech(text))
        if not isinstance(ev, Speech):
            out.append(ev)
    return out


def all_passes(decoders: list[Any]) -> dict[str, Any]:
    """The speculation metrics of a reply's every decoder pass: a tool round's call is
    decoded apart from the answer after it, and its target passes count as much."""
    ms = [d.metrics for d in decoders]
    if len(ms) > 1 and all(isinstance(m, SpecMetrics) for m in ms):
        total = SpecMetrics()
        for m in ms:
            total.merge(m)
        return total.as_dict()
    return ms[-1].as_dict()  # type: ignore[no-any-return]
