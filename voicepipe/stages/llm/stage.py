"""LLM stage: TranscriptFinal → streamed TextDelta + speakable TextChunk frames.

    TranscriptFinal ─► conversation (system prompt from config + turns)
                    ─► chat template ─► speculative decoder (one step per thread hop)
                    ─► TextDelta per step ─► Chunker ─► TextChunk (last=True ends the reply)

Each session keeps its own conversation and KV cache (the weights are shared
by every session in the process); a new turn only prefills what the cache
does not already hold (the previous prompt and the reply generated to it stay
there), a new session copies the rendered system prompt's keys and values from
a process-wide prefix cache (``llm.prefix_cache``, voicepipe/nn/llm/prefix.py),
and what is left is prefilled ``llm.prefill_chunk`` tokens per thread hop. With
``llm.batching`` the prompt's chunks and the decoder's steps run in the process's
batch scheduler instead (schedulers/llm_batch.py): one pass for every session's rows.
``llm.ttft`` says where the prompt's tokens came from: ``prefilled`` (run
through the model this turn, in ``prefill_chunks`` chunked passes plus the
decoder's last token), ``shared`` (prefix cache), ``reused`` (session cache).
On ``Interrupt`` the base Stage cancels the reply
task; the step running in its thread finishes (tens of ms) and nothing more
is generated. The conversation then keeps only the text that had already
been handed to the TTS — the rest was never spoken.

Spans (docs/DESIGN.md §9): ``llm.ttft`` from the transcript's arrival to the first
token; ``llm.first_chunk`` from the first token to the first TextChunk;
``llm.tpot`` at the end of a reply, a span one mean inter-token interval long
ending at the last token (mean time per output token after the first; the
token count and whole decode time ride in its attrs). A MetricsFrame carries
tpot_ms and the speculation metrics (of the whole reply: a tool round's call too).

Preemptive generation (core/turns/preempt.py, ``turns.preempt``): a tentative reply
starts on a ``TranscriptStable`` and is held until the final transcript agrees;
see voicepipe/stages/llm/preempt.py.

The conversation holds committed turns only; a reply is found again by its
turn (``set_heard``), by identity, so dropping old turns shifts nothing.

Tools (``[tools]``, docs/TOOLS.md; on where the chat template renders them):
the tools block is part of the prefix-cached system prefix; the reply's text
passes through a ``core.tools.CallSplitter``, so a call's tags and JSON never
reach the deltas, the chunker or the TTS. When the model stops after calls
they run (stages/llm/tools.py), the call and the results join the prompt, and
decoding goes on into the spoken answer (at most ``tools.max_rounds`` rounds).
Span ``llm.tool``: first token of a round's calls → first token after their
results. A tentative reply runs no tool before the final transcript confirms
it. A timer that ends puts an ``Alert`` into this stage's inbox: pushed on, then
spoken as a one-chunk reply of a new turn (the ``TurnCounter`` shared with the ASR).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.text.chunker import Chunker
from voicepipe.core.tools import FORCED_CALL, BadCall, CallSplitter, Speech, ToolCall
from voicepipe.core.turns.preempt import Preemption
from voicepipe.frames import (
    Alert,
    Cancel,
    ContextEdit,
    Frame,
    Interrupt,
    MetricsFrame,
    ReplyHeard,
    Respond,
    SessionSetup,
    SpeechResumed,
    SystemFrame,
    TextChunk,
    ToolCallOut,
    TranscriptFinal,
    TranscriptStable,
)
from voicepipe.nn.threads import BUDGET
from voicepipe.schedulers.llm_batch import Batcher, Steps, batcher_for
from voicepipe.schedulers.llm_batch import prefill as batched_prefill
from voicepipe.speculative.metrics import SpecMetrics
from voicepipe.stage import TurnCounter
from voicepipe.stages.llm.context import EndpointContext
from voicepipe.stages.llm.engine import engine_for, system_prefix
from voicepipe.stages.llm.preempt import Preempting, _Reply
from voicepipe.stages.llm.tools import (
    Alerts,
    Round,
    active_tools,
    run_round,
    system_prompt,
    tag_ids,
    use_skeletons,
)
from voicepipe.tools import Toolbox

log = logging.getLogger(__name__)
_DONE = object()
_KEEP_REPLIES = 16  # turns whose reply set_heard can still find


class LlmStage(EndpointContext, Preempting):
    name = "llm"

    def __init__(
        self, cfg: Config, engine: object | None = None, turns: TurnCounter | None = None
    ) -> None:
        super().__init__(queue_size=16)
        self.cfg = cfg
        self.engine = engine
        self._owns_engine = engine is None  # built in start(): released in stop()
        self.messages: list[dict[str, Any]] = []
        if cfg.llm.system_prompt:
            self.messages.append({"role": "system", "content": cfg.llm.system_prompt})
        self.tools: Toolbox | None = None
        self._specs: list[dict[str, Any]] | None = None  # what the chat template renders
        self._builtin_specs: list[dict[str, Any]] = []
        self._init_context(cfg.llm.max_new_tokens)  # endpoint control (stages/llm/context.py)
        self._alerts: Alerts | None = None
        self._last_turn = 0  # the latest turn seen
        self.turns = turns  # shared with the ASR: an alert's own turn id
        if engine is not None:
            self._setup_tools()
        # One model pass at a time per session, even when a cancelled step is still running.
        self._lock = threading.Lock()
        self.last_metrics: dict[str, float | int | list[float]] = {}
        self._reply_of: dict[int, dict[str, str]] = {}  # turn → its assistant message
        self.preempt = Preemption(cfg.turns.preempt)
        self._tentative: _Reply | None = None

    # ------------------------------------------------------------ conversation memory

    def set_heard(self, turn: int, text: str) -> bool:
        """Replace a cut-off reply with what the user actually heard (see core/turns/heard.py).

        Returns False when the turn's reply is no longer in the conversation.
        """
        msg = self._reply_of.get(turn)  # (a tool round's messages stay as they were)
        if msg is None or not any(m is msg for m in self.messages):
            return False
        msg["content"] = text
        return True

    def _remember(self, r: _Reply) -> None:
        """Record a committed turn once: the user's words and what reached the TTS."""
        if r.remembered:
            return
        r.remembered = True
        user = [{"role": "user", "content": r.text}] if r.text else []
        self.messages += [*user, *r.tool_msgs]
        if r.ends_in_call:  # the client's tool output comes next, then a reply to it
            return
        reply = {"role": "assistant", "content": " ".join(r.spoken)}
        self.messages.append(reply)
        self._reply_of[r.turn] = reply
        while len(self._reply_of) > _KEEP_REPLIES:
            del self._reply_of[min(self._reply_of)]

    def _prompt(self, user_text: str, extra: list[dict[str, Any]] | None = None) -> list[int]:
        """The prompt's token ids: the conversation, ``user_text`` (none when empty: a reply
        on an endpoint's request) and ``extra`` (this reply's tool round so far)."""
        eng = self.engine
        budget = eng.target.max_len - self.max_new_tokens - 8  # type: ignore[attr-defined]
        first_turn = 1 if self.messages and self.messages[0]["role"] == "system" else 0
        kw = {"tools": self._specs} if self._specs else {}
        while True:
            user = [{"role": "user", "content": user_text}] if user_text else []
            msgs = [*self.messages, *user, *(extra or [])]
            ids = eng.tokenizer.chat_ids(msgs, **kw)  # type: ignore[attr-defined]
            if len(ids) <= budget or len(self.messages) <= first_turn:
                return ids[-budget:]
            # Forget the oldest turn: its question and its answer together, so the history
            # never starts with an answer to a question it no longer holds.
            del self.messages[first_turn]
            while len(self.messages) > first_turn and self.messages[first_turn]["role"] != "user":
                del self.messages[first_turn]

    # ------------------------------------------------------------ stage hooks

    def _setup_tools(self) -> None:
        """Tools on or off for this session's engine, and the system prompt to match."""
        tok = getattr(self.engine, "tokenizer", None)
        self.tools = active_tools(self.cfg, tok) if tok is not None else None
        self._builtin_specs = self.tools.specs() if self.tools else []
        self._merge_specs()
        self._set_system(system_prompt(self.cfg, self.tools))

    def _context(self) -> Alerts:
        if self._alerts is None or self._alerts.loop is not asyncio.get_running_loop():
            # (``voicepipe chat`` runs each turn in its own event loop)
            latest = lambda: max(self._last_turn, self.current_turn)  # noqa: E731
            self._alerts = Alerts(asyncio.get_running_loop(), self.put, latest)
        return self._alerts

    async def start(self) -> None:
        if self.engine is None:
            self.engine = await asyncio.to_thread(engine_for, self.cfg)
            self._setup_tools()
        elif hasattr(self.engine, "share_prefix"):  # an engine given: its caches may be cold
            await asyncio.to_thread(self._share_prefix)

    def _share_prefix(self) -> None:
        eng = self.engine
        sys_prompt = self.messages[0]["content"] if self.messages else ""
        with self._lock:
            eng.share_prefix(system_prefix(eng.tokenizer, sys_prompt, self._specs))  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._alerts is not None:
            self._alerts.cancel_all()  # a session's timers end with it
        if self._tentative is not None:
            await self._cancel(self._tentative, "end")
        if self._owns_engine:
            # The fork's KV caches (~95 MB) go now, whoever still holds this stage (a
            # traceback, a test): a finished session must not keep them until a full GC.
            self.engine = None

    async def on_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, Interrupt):
            # The base class cancelled the reply in progress; a tentative one runs on its own.
            await self._apply(self.preempt.on_interrupt(frame.turn_id), frame.turn_id)
        elif isinstance(frame, Cancel):
            await self._apply(self.preempt.on_cancel(frame.turn_id), frame.turn_id)
        elif isinstance(frame, ReplyHeard):
            self.set_heard(frame.turn_id, frame.text)

    def _step(self, gen: Iterator[list[int]]) -> object:
        with self._lock:
            return next(gen, _DONE)

    async def process(self, frame: Frame) -> None:
        self._last_turn = max(self._last_turn, frame.turn_id)
        if isinstance(frame, Alert):  # a timer ended: tell the client, then say it
            latest = max(frame.turn_id, self._last_turn, self.current_turn)
            # A reply of its own (a new turn id) where the ASR shares its turn counter;
            # else (no ASR: bench, chat) the latest turn's.
            frame.turn_id = self.turns.next(latest) if self.turns is not None else latest
            self._last_turn = frame.turn_id
            await self.push(frame)
            await self.push(TextChunk(turn_id=frame.turn_id, text=frame.text, last=True))
            return
        if isinstance(frame, SessionSetup):
            self.configure(frame)
            await self.push(frame)
            return
        if isinstance(frame, ContextEdit):
            self.edit(frame)
            return
        if isinstance(frame, Respond):
            with self.overrides(frame):
                await self.reply(frame.turn_id, "", frame.t_ns)
            return
        if isinstance(frame, TranscriptStable):  # between ASR and here only: not pushed on
            if not self.auto_reply:
                return  # no reply of its own: nothing to start early
            await self._apply(
                self.preempt.on_stable(frame.turn_id, frame.text.strip()), frame.turn_id, frame
            )
            return
        if isinstance(frame, SpeechResumed):
            await self._apply(self.preempt.on_resumed(frame.turn_id), frame.turn_id)
            return
        await self.push(frame)
        if not isinstance(frame, TranscriptFinal) or not frame.text.strip() or not self.auto_reply:
            return
        text = frame.text.strip()
        d = self.preempt.on_final(frame.turn_id, text)
        r = self._tentative
        if d.commit and r is not None:
            self._tentative = None
            await self._commit(r, frame.t_ns)
            assert r.task is not None
            await r.task  # now this stage's work: an Interrupt cancels it as usual
            return
        await self._apply(d, frame.turn_id)
        await self.reply(
            frame.turn_id,
            text,
            frame.t_ns,
            preempt="cancelled" if d.cancel == frame.turn_id else "off",
        )

    # ------------------------------------------------------------ generation

    async def reply(
        self, turn: int, text: str, request_ns: int | None = None, *, preempt: str = "off"
    ) -> str:
        """Generate and stream one reply; returns the text kept in the conversation."""
        r = _Reply(turn, text, now_ns() if request_ns is None else request_ns, preempt=preempt)
        await self._generate(r)
        return " ".join(r.spoken)

    async def _client_calls(self, r: _Reply, calls: list[ToolCall | BadCall], said: str) -> bool:
        """Calls of client tools end the reply: each goes out as a ``ToolCallOut`` and the
        conversation keeps the call message (built-in calls of the same round are dropped:
        the model sees them again, if it still wants them, after the client's results)."""
        names = self.client_tool_names
        mine = [c for c in calls if isinstance(c, ToolCall) and c.name in names]
        if not mine:
            return False
        r.ends_in_call = True
        r.tool_msgs.append(
            {"role": "assistant", "content": said, "tool_calls": [c.for_template() for c in mine]}
        )
        for c in mine:
            args = json.dumps(c.arguments, ensure_ascii=False)
            await self._emit(r, ToolCallOut(turn_id=r.turn, name=c.name, arguments=args))
        return True

    async def _prefill(self, ids: list[int]) -> int:
        """Prefill what the caches lack of the prompt, ``llm.prefill_chunk`` tokens per thread
        hop, so a long prompt is many short steps: other sessions' steps get the worker
        threads and the cores in between, and an Interrupt stops it after the current
        chunk. Returns the model passes run (the decoder's own prefill then runs one token)."""
        chunk = self.cfg.llm.prefill_chunk
        if chunk <= 0 or not hasattr(self.engine, "feed"):
            return 0
        batcher = self._batcher()
        if batcher is not None:
            return await batched_prefill(batcher, self.engine, ids, chunk)
        gen = self.engine.feed(ids, chunk)  # type: ignore[attr-defined]
        n = 0
        while await asyncio.to_thread(self._step, gen) is not _DONE:
            n += 1
        return n

    def _batcher(self) -> Batcher | None:
        """The process's batch scheduler for this model (``llm.batching``), else None."""
        if not self.cfg.llm.batching or not hasattr(getattr(self.engine, "target", None), "model"):
            return None
        return batcher_for(self.engine)

    async def _generate(self, r: _Reply) -> None:
        from voicepipe.nn.llm.tokenizer import StreamDecoder

        eng = self.engine
        assert eng is not None
        turn = r.turn
        ids = self._prompt(r.text)
        target = getattr(eng, "target", None)
        counts0 = (getattr(target, "prefilled", 0), getattr(target, "shared", 0))
        chunks = await self._prefill(ids)
        stop = eng.tokenizer.stop_ids  # type: ignore[attr-defined]
        keep = tag_ids(eng.tokenizer) if self._specs else frozenset()  # type: ignore[attr-defined]
        chunker = Chunker(
            first_min_words=self.cfg.llm.first_min_words,
            first_break_words=self.cfg.llm.first_break_words,
        )
        spoken = r.spoken
        first_tok_ns = last_tok_ns = 0
        n_tokens = 0
        tool_ns = 0  # time in tool rounds: not decode time (llm.tpot)
        rounds = 0
        rnd: Round | None = None  # the round whose answer's first token ends llm.tool
        forced = ""  # a call's opening, put in the model's mouth (see below)
        call_ns = 0
        # (the tools of this reply: a response's own may differ from the session's)
        use_skeletons(eng, self._specs if self.cfg.llm.tool_skeleton else None)
        dec = eng.decoder()  # type: ignore[attr-defined]
        done: list[Any] = []  # the decoders of the reply's earlier passes (tool rounds)
        batcher = self._batcher()
        steps: Steps | None = None
        BUDGET.start_session()  # (voicepipe/nn/threads.py: other calls' thread counts)
        try:
            while True:  # one pass per tool round: the model stops after its calls
                steps = Steps(batcher, dec, ids, self.max_new_tokens, stop, self._lock)
                stream = StreamDecoder(eng.tokenizer, keep)  # type: ignore[attr-defined]
                split = CallSplitter() if self._specs else None  # calls never reach speech
                said: list[str] = []  # this pass's text, spoken or not yet
                calls: list[ToolCall | BadCall] = []
                if split is not None and forced:
                    split.push(forced)
                while True:
                    step = await steps.next()
                    if step is None:
                        break
                    t = now_ns()
                    assert isinstance(step, list)
                    n_tokens += len(step)
                    if not first_tok_ns:
                        first_tok_ns = r.first_tok_ns = t
                        prefilled = getattr(target, "prefilled", 0) - counts0[0]
                        shared = getattr(target, "shared", 0) - counts0[1]
                        await self._span(
                            r, "llm.ttft", r.request_ns, t, prompt_tokens=len(ids),
                            prefilled=prefilled,  # run through the model for this turn
                            shared=shared,  # copied from the process-wide prefix cache
                            reused=len(ids) - prefilled - shared,  # held by the session's cache
                            prefill_chunks=chunks,
                        )  # fmt: skip
                    if rnd is not None:  # the first token after a tool round's results
                        tool_ns += t - rnd.started_ns
                        await self._span(r, "llm.tool", rnd.started_ns, t, **rnd.span_attrs())
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
                    await self._say(r, chunker, events, said, calls)
                if split is not None:
                    await self._say(r, chunker, split.flush(), said, calls)
                if await self._client_calls(r, calls, "".join(said).strip()):
                    break  # the client runs them: this reply ends with its calls
                if not calls or rounds >= self.cfg.tools.max_rounds:
                    break  # (past max_rounds further calls are dropped: the reply ends)
                if not forced and all(isinstance(c, BadCall) and not c.raw for c in calls):
                    # Empty call tags ("<tools></tools>"): the model meant to call but
                    # wrote nothing. Told so, the 1.5B gives up; started on a call's
                    # opening, it names the tool and its arguments. Decode that pass again.
                    forced = FORCED_CALL
                    ids = ids + eng.tokenizer.encode(forced)  # type: ignore[attr-defined]
                    done.append(dec)
                    dec = eng.decoder()  # type: ignore[attr-defined]
                    continue
                # The model asked for tools: run them, show it the results, decode on.
                rounds += 1
                rnd = Round(started_ns=call_ns or last_tok_ns)
                call_ns, forced = 0, ""
                rnd.calls = [c for c in calls if isinstance(c, ToolCall)]
                rnd.errors = [c.error for c in calls if isinstance(c, BadCall)]
                if r.tentative:  # no side effects before the final transcript agrees
                    await r.committed.wait()
                box = self.tools or Toolbox()  # (only client tools: a call to no tool)
                await run_round(box, rnd, self._context(), self.cfg.tools.timeout_s)
                r.tool_msgs += rnd.messages("".join(said).strip())
                ids = self._prompt(r.text, r.tool_msgs)
                done.append(dec)
                dec = eng.decoder()  # type: ignore[attr-defined]
            rest = chunker.flush()
            if rest:
                if not spoken:
                    await self._span(r, "llm.first_chunk", first_tok_ns, now_ns(), chars=len(rest))
                spoken.append(rest)
            await self._emit(r, TextChunk(turn_id=turn, text=rest or "", last=True))
        finally:
            BUDGET.end_session()
            if steps is not None:
                steps.close()  # (batched: leaves the batch before the next step)
            # Interrupted or not, the conversation remembers only what reached the TTS; a
            # tentative reply not (yet) committed is remembered by _commit, or never.
            if not r.tentative and not r.cancelled:
                self._remember(r)
            m = _all_passes([*done, dec])
            if n_tokens > 1:
                decode_ns = last_tok_ns - first_tok_ns - tool_ns
                m["tpot_ms"] = round(decode_ns / 1e6 / (n_tokens - 1), 3)
            m["interrupted"] = int(self.current_turn > turn or r.cancelled)
            if rounds:
                m["tool_rounds"] = rounds
            if not r.cancelled:
                self.last_metrics = m
            values = {k: v for k, v in m.items() if isinstance(v, (int, float))}
            if not self.current_turn > turn and not r.cancelled:
                if n_tokens > 1:
                    mean_ns = (last_tok_ns - first_tok_ns - tool_ns) // (n_tokens - 1)
                    await self._span(
                        r,
                        "llm.tpot",
                        last_tok_ns - mean_ns,
                        last_tok_ns,
                        tokens=n_tokens,
                        decode_ms=round((last_tok_ns - first_tok_ns - tool_ns) / 1e6, 3),
                    )
                await self._emit(r, MetricsFrame(turn_id=turn, source="llm", values=values))


def _all_passes(decoders: list[Any]) -> dict[str, Any]:
    """The speculation metrics of a reply's every decoder pass: a tool round's call is
    decoded apart from the answer after it, and its target passes count as much."""
    ms = [d.metrics for d in decoders]
    if len(ms) > 1 and all(isinstance(m, SpecMetrics) for m in ms):
        total = SpecMetrics()
        for m in ms:
            total.merge(m)
        return total.as_dict()
    return ms[-1].as_dict()  # type: ignore[no-any-return]
