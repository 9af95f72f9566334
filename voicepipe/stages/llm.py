"""LLM stage: TranscriptFinal → streamed TextDelta + speakable TextChunk frames.

    TranscriptFinal ─► conversation (system prompt from config + turns)
                    ─► chat template ─► speculative decoder (one step per thread hop)
                    ─► TextDelta per step ─► Chunker ─► TextChunk (last=True ends the reply)

Each session keeps its own conversation and KV cache (the weights are shared
by every session in the process); a new turn only prefills what the cache
does not already hold (the previous prompt and the reply generated to it stay
there), a new session copies the rendered system prompt's keys and values from
a process-wide prefix cache (``llm.prefix_cache``, voicepipe/nn/prefix.py),
and what is left is prefilled ``llm.prefill_chunk`` tokens per thread hop.
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
tpot_ms and the speculation metrics.

Preemptive generation (core/preempt.py, ``turns.preempt``): a
``TranscriptStable`` starts a *tentative* reply in a background task while
the endpointer still waits. Everything it would push (text, chunks, spans,
metrics) is held here, so the TTS, the client and the conversation memory see
nothing of it, until the ``TranscriptFinal``: if it agrees the held frames go
out at once and the reply continues as this stage's work (an Interrupt stops
it as usual); otherwise (or on ``SpeechResumed``, a newer stable text, or an
Interrupt) the task is cancelled and its frames dropped, and a differing
final is answered the normal way. The engine's KV cache needs no undo: the
next prompt reuses only its common prefix. Every span carries
``attrs["preempt"]``: ``off`` (no tentative reply for the turn), ``kept`` or
``cancelled`` (a tentative reply was dropped and this is the normal one); a
MetricsFrame with source ``preempt`` counts each outcome.

The conversation holds committed turns only; a reply is found again by its
turn (``set_heard``), by identity, so dropping old turns shifts nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.chunker import Chunker
from voicepipe.core.preempt import Decision, Preemption
from voicepipe.frames import (
    Cancel,
    Frame,
    Interrupt,
    MetricsFrame,
    ReplyHeard,
    SpanFrame,
    SpeechResumed,
    SystemFrame,
    TextChunk,
    TextDelta,
    TranscriptFinal,
    TranscriptStable,
)
from voicepipe.stage import Stage

log = logging.getLogger(__name__)
_DONE = object()
_KEEP_REPLIES = 16  # turns whose reply set_heard can still find


_BASES: dict[tuple, object] = {}  # [llm] settings → the process's base engine
_BASES_LOCK = threading.Lock()


def engine_for(cfg: Config):  # noqa: ANN201 - imports torch lazily
    """A per-session engine over process-wide shared weights."""
    from voicepipe.nn.engine import load_engine
    from voicepipe.spec.sampling import SamplingParams

    c = cfg.llm
    sp = SamplingParams(c.temperature, c.top_k, c.top_p, c.seed)
    key = (c.model, c.weights, c.drafter, c.spec_k, c.adaptive_k, c.temperature, c.top_k,
           c.top_p, c.seed, c.reply_store, c.prefix_cache)  # fmt: skip
    with _BASES_LOCK:
        base = _BASES.get(key)
        if base is None:
            # 2048 positions: a voice conversation's window (older turns are dropped), and
            # a per-session fp32 KV cache of ~95 MB for SmolLM2 rather than twice that.
            # Built once per process: a session only forks it (fresh caches), instead of
            # paying the tokenizer, the model registry's manifests and a second cache
            # each time a client says hello.
            base = _BASES[key] = load_engine(
                c.model, c.weights, c.drafter, c.spec_k, c.adaptive_k, sp, max_len=2048,
                reply_store=c.reply_store, prefix_cache=c.prefix_cache,
            )  # fmt: skip
    eng = base.fork()  # type: ignore[attr-defined]
    # The first session of the process (or the server's preload) computes the system
    # prompt's keys and values; every later one copies them.
    eng.share_prefix(system_prefix(eng.tokenizer, c.system_prompt))
    return eng


def system_prefix(tokenizer, system_prompt: str) -> list[int]:  # noqa: ANN001 (ChatTokenizer)
    """The tokens every prompt of a conversation starts with: the rendered system prompt
    and whatever the chat template puts before the user's words. Found as the common
    prefix of two renders that differ only in those words, so a template that renders
    its turns unusually shares what is really common and no more."""
    from voicepipe.nn.target import _common_prefix

    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    a = tokenizer.chat_ids([*head, {"role": "user", "content": "Hello."}])
    b = tokenizer.chat_ids([*head, {"role": "user", "content": "2"}])
    return a[: _common_prefix(a, b)]


@dataclass
class _Reply:
    """One reply being generated; while ``held`` is a list its output waits there."""

    turn: int
    text: str  # the user's words it answers
    request_ns: int
    preempt: str = "off"  # span attr: off | tentative → kept | cancelled
    held: list[Frame] | None = None
    spoken: list[str] = field(default_factory=list)  # chunks handed to the TTS (or held)
    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    remembered: bool = False
    ahead_ms: float = 0.0  # kept: how long before the final transcript it started

    @property
    def tentative(self) -> bool:
        return self.preempt == "tentative"


class LlmStage(Stage):
    name = "llm"

    def __init__(self, cfg: Config, engine: object | None = None) -> None:
        super().__init__(queue_size=16)
        self.cfg = cfg
        self.engine = engine
        self._owns_engine = engine is None  # built in start(): released in stop()
        self.messages: list[dict[str, str]] = []
        if cfg.llm.system_prompt:
            self.messages.append({"role": "system", "content": cfg.llm.system_prompt})
        # One model pass at a time per session, even when a cancelled step is still running.
        self._lock = threading.Lock()
        self.last_metrics: dict[str, float | int | list[float]] = {}
        self._reply_of: dict[int, dict[str, str]] = {}  # turn → its assistant message
        self.preempt = Preemption(cfg.turns.preempt)
        self._tentative: _Reply | None = None

    # ------------------------------------------------------------ conversation memory

    def set_heard(self, turn: int, text: str) -> bool:
        """Replace a cut-off reply with what the user actually heard (see core/heard.py).

        Returns False when the turn's reply is no longer in the conversation.
        """
        msg = self._reply_of.get(turn)
        if msg is None or not any(m is msg for m in self.messages):
            return False
        msg["content"] = text
        return True

    def _remember(self, r: _Reply) -> None:
        """Record a committed turn once: the user's words and what reached the TTS."""
        if r.remembered:
            return
        r.remembered = True
        reply = {"role": "assistant", "content": " ".join(r.spoken)}
        self.messages += [{"role": "user", "content": r.text}, reply]
        self._reply_of[r.turn] = reply
        while len(self._reply_of) > _KEEP_REPLIES:
            del self._reply_of[min(self._reply_of)]

    def _prompt(self, user_text: str) -> list[int]:
        eng = self.engine
        budget = eng.target.max_len - self.cfg.llm.max_new_tokens - 8  # type: ignore[attr-defined]
        first_turn = 1 if self.messages and self.messages[0]["role"] == "system" else 0
        while True:
            msgs = [*self.messages, {"role": "user", "content": user_text}]
            ids = eng.tokenizer.chat_ids(msgs)  # type: ignore[attr-defined]
            if len(ids) <= budget or len(self.messages) <= first_turn:
                return ids[-budget:]
            # Forget the oldest turn: its question and its answer together, so the history
            # never starts with an answer to a question it no longer holds.
            del self.messages[first_turn]
            while len(self.messages) > first_turn and self.messages[first_turn]["role"] != "user":
                del self.messages[first_turn]

    # ------------------------------------------------------------ stage hooks

    async def start(self) -> None:
        if self.engine is None:
            self.engine = await asyncio.to_thread(engine_for, self.cfg)
        elif hasattr(self.engine, "share_prefix"):  # an engine given: its caches may be cold
            await asyncio.to_thread(self._share_prefix)

    def _share_prefix(self) -> None:
        eng = self.engine
        sys_prompt = self.messages[0]["content"] if self.messages else ""
        with self._lock:
            eng.share_prefix(system_prefix(eng.tokenizer, sys_prompt))  # type: ignore[attr-defined]

    async def stop(self) -> None:
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
        if isinstance(frame, TranscriptStable):  # between ASR and here only: not pushed on
            await self._apply(
                self.preempt.on_stable(frame.turn_id, frame.text.strip()), frame.turn_id, frame
            )
            return
        if isinstance(frame, SpeechResumed):
            await self._apply(self.preempt.on_resumed(frame.turn_id), frame.turn_id)
            return
        await self.push(frame)
        if not isinstance(frame, TranscriptFinal) or not frame.text.strip():
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

    # ------------------------------------------------------------ preemption

    async def _apply(self, d: Decision, turn: int, stable: TranscriptStable | None = None) -> None:
        if d.cancel is not None and self._tentative is not None:
            r, self._tentative = self._tentative, None
            await self._cancel(r, "preempt")
        if d.start is not None and stable is not None:
            r = _Reply(turn, d.start, stable.t_ns, preempt="tentative", held=[])
            r.task = asyncio.create_task(self._generate(r), name=f"llm:tentative:{turn}")
            self._tentative = r

    async def _cancel(self, r: _Reply, reason: str) -> None:
        r.cancelled = True
        r.held = None
        task = r.task
        if task is not None:
            task.cancel()
            await asyncio.wait({task})  # raises only if this stage itself is being cancelled
            if not task.cancelled() and task.exception() is not None:
                # A reply nobody will hear failed: worth a log line, not the session.
                log.warning("tentative reply failed: %r", task.exception())
        await self.push(MetricsFrame(turn_id=r.turn, source="preempt", values={"cancelled": 1}))

    async def _commit(self, r: _Reply, final_ns: int) -> None:
        """The final agreed: release what the tentative reply held, in order, at once."""
        r.preempt = "kept"
        r.ahead_ms = round((final_ns - r.request_ns) / 1e6, 1)  # started this long before the final
        await self.push(
            MetricsFrame(
                turn_id=r.turn, source="preempt", values={"kept": 1, "ahead_ms": r.ahead_ms}
            )
        )
        while r.held:  # the task may add more while a push waits
            f = r.held.pop(0)
            if isinstance(f, SpanFrame):
                f.attrs["preempt"] = "kept"
                f.attrs["ahead_ms"] = r.ahead_ms
                if f.name == "llm.first_chunk":  # handed to the TTS now, not when it was ready
                    f.attrs["ready_ms"] = round(f.duration_ms, 3)
                    f.end_ns = max(f.end_ns, now_ns())
            await self.push(f)
        r.held = None
        assert r.task is not None
        if r.task.done():
            self._remember(r)

    async def _emit(self, r: _Reply, frame: Frame) -> None:
        if r.cancelled:
            return
        if r.held is not None:
            r.held.append(frame)
        else:
            await self.push(frame)

    # ------------------------------------------------------------ generation

    async def reply(
        self, turn: int, text: str, request_ns: int | None = None, *, preempt: str = "off"
    ) -> str:
        """Generate and stream one reply; returns the text kept in the conversation."""
        r = _Reply(turn, text, now_ns() if request_ns is None else request_ns, preempt=preempt)
        await self._generate(r)
        return " ".join(r.spoken)

    async def _prefill(self, ids: list[int]) -> int:
        """Prefill what the caches lack of the prompt, ``llm.prefill_chunk`` tokens per thread
        hop, so a long prompt is many short steps: other sessions' steps get the worker
        threads and the cores in between, and an Interrupt stops it after the current
        chunk. Returns the model passes run (the decoder's own prefill then runs one token)."""
        chunk = self.cfg.llm.prefill_chunk
        if chunk <= 0 or not hasattr(self.engine, "feed"):
            return 0
        gen = self.engine.feed(ids, chunk)  # type: ignore[attr-defined]
        n = 0
        while await asyncio.to_thread(self._step, gen) is not _DONE:
            n += 1
        return n

    async def _span(self, r: _Reply, name: str, start_ns: int, end_ns: int, **attrs) -> None:
        attrs["preempt"] = r.preempt
        if r.preempt == "kept":
            attrs["ahead_ms"] = r.ahead_ms
        await self._emit(
            r, SpanFrame(turn_id=r.turn, name=name, start_ns=start_ns, end_ns=end_ns, attrs=attrs)
        )

    async def _generate(self, r: _Reply) -> None:
        from voicepipe.nn.tokenizer import StreamDecoder

        eng = self.engine
        assert eng is not None
        turn = r.turn
        ids = self._prompt(r.text)
        target = getattr(eng, "target", None)
        counts0 = (getattr(target, "prefilled", 0), getattr(target, "shared", 0))
        chunks = await self._prefill(ids)
        dec = eng.decoder()  # type: ignore[attr-defined]
        stop = eng.tokenizer.stop_ids  # type: ignore[attr-defined]
        gen = dec.generate(ids, self.cfg.llm.max_new_tokens, stop)
        stream = StreamDecoder(eng.tokenizer)  # type: ignore[attr-defined]
        chunker = Chunker()
        spoken = r.spoken
        first_tok_ns = last_tok_ns = 0
        n_tokens = 0
        try:
            while True:
                step = await asyncio.to_thread(self._step, gen)
                if step is _DONE:
                    break
                t = now_ns()
                assert isinstance(step, list)
                n_tokens += len(step)
                if not first_tok_ns:
                    first_tok_ns = t
                    prefilled = getattr(target, "prefilled", 0) - counts0[0]
                    shared = getattr(target, "shared", 0) - counts0[1]
                    await self._span(
                        r, "llm.ttft", r.request_ns, t, prompt_tokens=len(ids),
                        prefilled=prefilled,  # run through the model for this turn
                        shared=shared,  # copied from the process-wide prefix cache
                        reused=len(ids) - prefilled - shared,  # held by the session's cache
                        prefill_chunks=chunks,
                    )  # fmt: skip
                last_tok_ns = t
                delta = "".join(stream.push(tok) for tok in step)
                if not delta:
                    continue
                await self._emit(r, TextDelta(turn_id=turn, text=delta))
                for chunk in chunker.push(delta):
                    if not spoken:
                        await self._span(
                            r, "llm.first_chunk", first_tok_ns, now_ns(), chars=len(chunk)
                        )
                    spoken.append(chunk)
                    await self._emit(r, TextChunk(turn_id=turn, text=chunk))
            rest = chunker.flush()
            if rest:
                if not spoken:
                    await self._span(r, "llm.first_chunk", first_tok_ns, now_ns(), chars=len(rest))
                spoken.append(rest)
            await self._emit(r, TextChunk(turn_id=turn, text=rest or "", last=True))
        finally:
            # Interrupted or not, the conversation remembers only what reached the TTS; a
            # tentative reply not (yet) committed is remembered by _commit, or never.
            if not r.tentative and not r.cancelled:
                self._remember(r)
            m = dec.metrics.as_dict()
            if n_tokens > 1:
                m["tpot_ms"] = round((last_tok_ns - first_tok_ns) / 1e6 / (n_tokens - 1), 3)
            m["interrupted"] = int(self.current_turn > turn or r.cancelled)
            if not r.cancelled:
                self.last_metrics = m
            values = {k: v for k, v in m.items() if isinstance(v, (int, float))}
            if not self.current_turn > turn and not r.cancelled:
                if n_tokens > 1:
                    mean_ns = (last_tok_ns - first_tok_ns) // (n_tokens - 1)
                    await self._span(
                        r,
                        "llm.tpot",
                        last_tok_ns - mean_ns,
                        last_tok_ns,
                        tokens=n_tokens,
                        decode_ms=round((last_tok_ns - first_tok_ns) / 1e6, 3),
                    )
                await self._emit(r, MetricsFrame(turn_id=turn, source="llm", values=values))
