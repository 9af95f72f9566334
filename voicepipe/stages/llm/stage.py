"""LLM stage: TranscriptFinal → streamed TextDelta + speakable TextChunk frames.

    TranscriptFinal ─► conversation (system prompt from config + turns)
                    ─► chat template ─► speculative decoder (one step per thread hop)
                    ─► TextDelta per step ─► Chunker ─► TextChunk (last=True ends the reply)

The stage holds its parts rather than inheriting them: the ``Conversation``
(stages/llm/context.py: memory, endpoint control), a ``Preempter`` (preempt.py: tentative
replies), the session's ``SessionTools`` (tools.py) and the token source the
``llm.backend`` setting picks: a ``LocalEngine`` (local.py: the model in this process,
prefill, decode, tool rounds) or a ``RemoteEngine`` (remote.py: an OpenAI-compatible
server). Each reply is a ``Reply`` (reply.py) that carries its frames to this stage's
output. On ``Interrupt`` the base Stage cancels the reply
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

Tools: see stages/llm/local.py. A timer that ends puts an ``Alert`` into this stage's
inbox: pushed on, then spoken as a one-chunk reply of a new turn (the ``TurnCounter``
shared with the ASR).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.turns.preempt import Decision, Preemption
from voicepipe.core.turns.semantic import EndOfTurnBoard
from voicepipe.frames import (
    Alert,
    Cancel,
    ContextEdit,
    Frame,
    Interrupt,
    MetricsFrame,
    ReplyHeard,
    ReplyWords,
    Respond,
    SessionSetup,
    SpanFrame,
    SpeechResumed,
    SystemFrame,
    TextChunk,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptStable,
)
from voicepipe.stage import Stage, TurnCounter
from voicepipe.stages.llm.ahead import PrefillAhead
from voicepipe.stages.llm.context import Conversation, Message
from voicepipe.stages.llm.local import LocalEngine
from voicepipe.stages.llm.p_end import PEndEstimator, estimator_for
from voicepipe.stages.llm.p_end import on_pause as p_end_on_pause
from voicepipe.stages.llm.preempt import Preempter
from voicepipe.stages.llm.remote import BACKENDS, LlmBackendError, RemoteEngine
from voicepipe.stages.llm.reply import Reply
from voicepipe.stages.llm.tools import SessionTools
from voicepipe.tools import Toolbox


class Backend(Protocol):
    """Where a reply's tokens come from (stages/llm/local.py, stages/llm/remote.py)."""

    @property
    def engine(self) -> Any: ...  # the local engine; None for a remote one

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def generate(self, r: Reply) -> None:
        """Emit the reply through ``r``; set ``r.metrics`` (and ``r.tpot``) once started."""
        ...


class LlmStage(Stage):
    """``engine``: a local engine fork to use (then the backend is local whatever
    ``llm.backend`` says); None: the backend ``llm.backend`` names, a local one built in
    ``start``. ``turns``: the turn counter shared with the ASR stage; ``eot``: where the
    streaming prefill posts P(end of turn) for the ASR's endpointer (shared likewise), or,
    with ``[turns] p_end_model`` set, the process's separate P(end) model does (p_end.py;
    the board then takes that model's estimates only, and the streaming prefill only
    prefills)."""

    name = "llm"

    def __init__(
        self,
        cfg: Config,
        engine: Any = None,
        turns: TurnCounter | None = None,
        eot: EndOfTurnBoard | None = None,
    ) -> None:
        super().__init__(queue_size=16)
        self.cfg = cfg
        self.conversation = Conversation(cfg.llm.system_prompt, cfg.llm.max_new_tokens)
        self._last_turn = 0  # the latest turn seen
        self.turns = turns  # shared with the ASR: an alert's own turn id
        self.toolset = SessionTools(cfg, self.put, self._latest_turn)
        self.backend: Backend
        if engine is not None or cfg.llm.backend == "local":
            self.backend = LocalEngine(cfg, engine, self.conversation, self.toolset)
        elif cfg.llm.backend == "openai":
            self.backend = RemoteEngine(cfg, self.conversation, self.toolset)
        else:
            raise LlmBackendError(
                f"unknown llm.backend {cfg.llm.backend!r} (one of {', '.join(BACKENDS)})"
            )
        self.last_metrics: dict[str, Any] = {}
        self.preempter = Preempter(
            Preemption(cfg.turns.preempt), self._out, self._generate, self.conversation.remember
        )
        self.eot = eot
        # A separate P(end) model (stages/llm/p_end.py), loaded (or found loaded) in start:
        # it answers each pause's transcript, whatever the backend.
        self.p_end_model = cfg.turns.p_end_model if eot is not None else ""
        self.estimator: PEndEstimator | None = None
        # Streaming prefill of the user's words (stages/llm/ahead.py): the local model only;
        # it posts P(end) only when no separate model does.
        self.ahead: PrefillAhead | None = None
        if cfg.turns.prefill_ahead and isinstance(self.backend, LocalEngine):
            board = None if self.p_end_model else eot
            self.ahead = PrefillAhead(self.backend, board, cfg.llm.prefill_chunk, cfg.llm.model)
        if eot is not None and (self.p_end_model or self.ahead is not None):
            eot.estimator = True  # each pause's transcript gets an answer (post or decline)
            eot.source = self.p_end_model  # ("": the reply LLM's streaming prefill)

    async def _out(self, frame: Frame) -> None:
        # (``push`` is wired after construction, by the pipeline: looked up at each frame)
        await self.push(frame)
        if isinstance(frame, TextChunk) and frame.text.strip():
            # The barge-in stage's echo reference: what the assistant is about to say.
            await self.push_upstream(ReplyWords(turn_id=frame.turn_id, text=frame.text))

    # (what callers read of the parts)
    @property
    def messages(self) -> list[Message]:
        return self.conversation.messages

    @property
    def engine(self) -> Any:
        return self.backend.engine

    @property
    def tools(self) -> Toolbox | None:
        return self.toolset.box

    def system_text(self) -> str:
        """The system prompt as settled in start() (the Realtime endpoint reports it as the
        session's instructions, looking for this method on the pipeline's stages)."""
        return self.conversation.system_text()

    def set_heard(self, turn: int, text: str) -> bool:
        """Replace a cut-off reply with what the user actually heard (core/turns/heard.py);
        False when the turn's reply is no longer in the conversation."""
        return self.conversation.set_heard(turn, text)

    def _latest_turn(self) -> int:
        return max(self._last_turn, self.current_turn)

    # ------------------------------------------------------------ stage hooks

    async def start(self) -> None:
        if self.p_end_model:
            self.estimator = await asyncio.to_thread(estimator_for, self.cfg)
        await self.backend.start()
        if self.ahead is not None:
            self.ahead.prepare()

    async def stop(self) -> None:
        self.toolset.close()  # a session's timers end with it
        if self.ahead is not None:
            await self.ahead.stop_background()
        if self.preempter.tentative is not None:
            await self.preempter.cancel(self.preempter.tentative, "end")
        await self.backend.stop()

    async def on_system(self, frame: SystemFrame) -> None:
        p = self.preempter
        if isinstance(frame, Interrupt):
            # The base class cancelled the reply in progress; a tentative one runs on its own.
            await p.apply(p.policy.on_interrupt(frame.turn_id), frame.turn_id)
        elif isinstance(frame, Cancel):
            await p.apply(p.policy.on_cancel(frame.turn_id), frame.turn_id)
        elif isinstance(frame, ReplyHeard):
            self.set_heard(frame.turn_id, frame.text)

    async def process(self, frame: Frame) -> None:
        self._last_turn = max(self._last_turn, frame.turn_id)
        conv, p = self.conversation, self.preempter
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
            conv.configure(frame)
            await self.push(frame)
            return
        if isinstance(frame, ContextEdit):
            conv.edit(frame)
            return
        if isinstance(frame, Respond):
            with conv.overrides(frame):
                await self.reply(frame.turn_id, "", frame.t_ns)
            return
        if isinstance(frame, TranscriptStable):  # between ASR and here only: not pushed on
            if not conv.auto_reply:
                if self.eot is not None and self.eot.estimator:
                    self.eot.decline(frame.turn_id, frame.speech_end_media_ns, self.eot.source)
                return  # no reply of its own: nothing to start early (nor P(end))
            d = p.policy.on_stable(frame.turn_id, frame.text.strip())
            await p.apply(Decision(cancel=d.cancel), frame.turn_id)  # (frees the cache)
            text, end = frame.text.strip(), frame.speech_end_media_ns
            if self.estimator is not None and self.eot is not None:  # P(end) first: the
                t0 = now_ns()  # endpointer waits for it; the reply's prefill after
                got, timing = await p_end_on_pause(
                    self.estimator, self.eot, frame.turn_id, text, end
                )
                await self._p_end_span(frame, t0, got, self.estimator.name, timing)
            if self.ahead is not None:  # the pause's words (and P(end) if no model above)
                t0 = now_ns()
                got = await self.ahead.on_pause(frame.turn_id, text, end)
                if self.estimator is None:
                    await self._p_end_span(
                        frame, t0, got, self.cfg.llm.model, self.ahead.pause_timing
                    )
            await p.apply(Decision(start=d.start), frame.turn_id, frame)
            return
        if isinstance(frame, SpeechResumed):
            await p.apply(p.policy.on_resumed(frame.turn_id), frame.turn_id)
            return
        await self.push(frame)
        if isinstance(frame, TranscriptPartial) and self.ahead is not None and conv.auto_reply:
            # ``all``: the whole partial, not only its agreed words: the cache keeps the
            # common token prefix of a revision, and a pause whose transcript is the last
            # partial's text finds its P(end) read already (ahead.on_pause).
            every = self.cfg.llm.prefill_partials == "all"
            words = (frame.heard or frame.text) if every else frame.stable_prefix
            await self.ahead.on_partial(frame.turn_id, words)
            return
        if not isinstance(frame, TranscriptFinal) or not frame.text.strip() or not conv.auto_reply:
            return
        text = frame.text.strip()
        d = p.policy.on_final(frame.turn_id, text)
        r = p.tentative
        if d.commit and r is not None:
            p.tentative = None
            await p.commit(r, frame.t_ns)
            assert r.task is not None
            await r.task  # now this stage's work: an Interrupt cancels it as usual
            return
        await p.apply(d, frame.turn_id)
        await self.reply(
            frame.turn_id,
            text,
            frame.t_ns,
            preempt="cancelled" if d.cancel == frame.turn_id else "off",
        )

    async def _p_end_span(
        self, frame: TranscriptStable, t0: int, got: float | None, model: str, timing: dict
    ) -> None:
        """From the pause's transcript to its estimate (or refusal); ``model``: whose."""
        await self.push(
            SpanFrame(
                turn_id=frame.turn_id,
                name="turns.p_end",
                start_ns=frame.t_ns,
                end_ns=now_ns(),
                attrs={
                    "model": model,
                    "queued_ms": round((t0 - frame.t_ns) / 1e6, 1),
                    **{k: round(v, 1) for k, v in timing.items()},
                    "p_end": -1.0 if got is None else round(got, 5),
                },
            )
        )

    # ------------------------------------------------------------ generation

    async def reply(
        self, turn: int, text: str, request_ns: int | None = None, *, preempt: str = "off"
    ) -> str:
        """Generate and stream one reply; returns the text kept in the conversation."""
        t_ns = now_ns() if request_ns is None else request_ns
        r = Reply(turn, text, t_ns, self._out, preempt=preempt)
        await self._generate(r)
        return " ".join(r.spoken)

    async def _generate(self, r: Reply) -> None:
        ahead = self.ahead
        if ahead is not None:
            ahead.replying += 1
        try:
            if ahead is not None:
                await ahead.before_reply(r)
            await self.backend.generate(r)
        finally:
            if ahead is not None:
                ahead.replying -= 1
            if r.metrics is not None:  # (None: stopped before its first pass, as if unasked)
                # Interrupted or not, the conversation remembers only what reached the TTS;
                # a tentative reply not (yet) committed is remembered by commit, or never.
                if not r.tentative and not r.cancelled:
                    self.conversation.remember(r)
                await self._close(r, r.metrics)

    async def _close(self, r: Reply, m: dict[str, Any]) -> None:
        """The reply's closing metrics, and its llm.tpot span unless it was cut off."""
        interrupted = self.current_turn > r.turn or r.cancelled
        m["interrupted"] = int(interrupted)
        if not r.cancelled:
            self.last_metrics = m
        if interrupted:
            return
        values = {k: v for k, v in m.items() if isinstance(v, (int, float))}
        if r.tpot is not None:
            start_ns, end_ns, attrs = r.tpot
            await r.span("llm.tpot", start_ns, end_ns, **attrs)
        await r.emit(MetricsFrame(turn_id=r.turn, source="llm", values=values))
