"""``/v1/realtime``: one OpenAI Realtime API (GA) session over the voice pipeline.

The protocol is ``core/realtime_session.RealtimeSession`` (sans-I/O: client events in,
server events and pipeline actions out); this shell moves its events to and from the
WebSocket and carries out its actions on the session's pipeline, the same pipeline a
``/ws`` session runs (ASR → barge-in → LLM → TTS → pacer). It is a ``Session``
subclass, so admission, drain, close codes and teardown are the server's usual ones;
there is no hello: the connection is admitted when it opens, and ``session.created``
is its first message.

Both directions are ordered through two queues filled synchronously: server events
go to ``_outbox`` (one sender task writes them, bounded by ``send_timeout_s``), and
pipeline actions to ``_actions`` (one task puts them into the pipeline in order,
audio included). So a method call's events leave in the order the session made them,
whichever side (client message or pipeline frame) caused them, and the pipeline
never waits on the socket or the other way round.

How the pipeline's frames map (docs/REALTIME.md has the table):

- ``SpeechStart`` / ``SpeechEnd`` → ``speech_started`` / ``speech_stopped`` (commit,
  and with ``create_response`` a response the LLM is already generating: its turn);
- ``TranscriptFinal`` (or an empty final) → the user item's transcript;
- ``TextDelta`` / ``AudioOut`` / ``ToolCallOut`` → transcript deltas, audio deltas
  (PCM16 at 24 kHz, paced at real time as on ``/ws``), function-call events;
- ``ReplyFinished`` → ``response.done``; an ``Alert`` (a timer) → a server response.

Turn detection off (or ``create_response`` false): the LLM stage no longer replies by
itself; committed audio becomes a user message when its transcript is final, and
``response.create`` becomes a ``Respond`` frame, held until every committed item
before it has its transcript.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import typing

import numpy as np
import soxr

from voicepipe import pipelines
from voicepipe.core.realtime import api as R
from voicepipe.core.realtime import server_events as S
from voicepipe.core.realtime.commits import CommitTracker
from voicepipe.core.realtime.events import FunctionTool, ToolChoice
from voicepipe.core.realtime.llm import chat_message, token_budget, tool_spec
from voicepipe.core.wire import protocol as P
from voicepipe.frames import (
    Alert,
    ContextEdit,
    ErrorFrame,
    Frame,
    ReplyHeard,
    Respond,
    SessionSetup,
    SpanFrame,
    SpeechEnd,
    SpeechStart,
    TextDelta,
    ToolCallOut,
    TranscriptFinal,
    TurnControl,
)
from voicepipe.pipeline import Pipeline
from voicepipe.server.session import Session
from voicepipe.stage import TurnCounter
from voicepipe.stages.output import AudioOut, ReplyFinished

log = logging.getLogger(__name__)
PATH = "/v1/realtime"
_ACTIONS_HIGH = 512  # queued pipeline actions before the socket reader waits
_KEEP_TURNS = 64  # responses whose turn a late truncate can still name


class RealtimeConnection(Session):
    endpoint = "/v1/realtime"

    def __init__(self, *args: typing.Any, **kw: typing.Any) -> None:
        super().__init__(*args, **kw)
        self.rt = R.RealtimeSession(
            session_id=f"sess_{self.id}", model="voicepipe", instructions=""
        )
        self._outbox: asyncio.Queue[str] = asyncio.Queue()
        self._actions: asyncio.Queue[R.Action | Frame] = asyncio.Queue()
        self._room = asyncio.Event()
        self._room.set()
        self._turns = TurnCounter()
        self._auto = True  # the LLM replies to each final by itself (server_vad + create_response)
        self._turn_item: dict[int, str] = {}  # ASR turn → its user item (server_vad)
        self._item_turn: dict[str, int] = {}
        self._resp_turn: dict[str, int] = {}  # response → the pipeline turn generating it
        self._turn_resp: dict[int, str] = {}
        self._heard_turns: list[int] = []  # (insertion order: forget the oldest)
        self._commits = CommitTracker()  # manual turns: the ASR turns each commit covers
        self._untranscribed: set[str] = set()  # committed items the LLM has not got yet
        self._held: list[R.StartResponse] = []  # responses waiting for those

    # ------------------------------------------------------------------ lifecycle

    async def _converse(self) -> None:
        """No hello: admitted (or refused) as the connection opens, then the session."""
        refusal = self.server.admit(self)
        if refusal is not None:
            retry = self.cfg.server.retry_after_s
            text = f"{refusal.value}; retry in {retry:g} s"
            await self._error("too_many_sessions", text)
            raise P.ProtocolError(refusal.value, P.CLOSE_TOO_MANY_SESSIONS)
        self.admitted = True
        await self._serve()

    async def _report_internal(self, e: Exception) -> None:
        await self._error("internal_error", repr(e)[:300])

    async def _error(self, code: str, message: str) -> None:
        """An ``error`` event sent now (the session is about to close)."""
        err = R.RealtimeError(code, message, type="server_error")
        event = S.ErrorEvent(event_id=self.rt.ids.new("event"), error=err)
        await self._send(R.encode_server_event(event))

    async def _serve(self) -> None:
        cfg = self.cfg
        rate = R.SAMPLE_RATE
        self.info = pipelines.SessionInfo(
            session_id=self.id,
            input_sample_rate=rate,
            asr_sample_rate=cfg.audio.asr_sample_rate,
            output_sample_rate=rate,
            frame_ms=cfg.audio.frame_ms,
            client="realtime",
            pipeline=self.server.pipeline_name,
        )
        self._resampler = soxr.ResampleStream(
            rate, cfg.audio.asr_sample_rate, 1, dtype="float32", quality="HQ", vr=True
        )
        stages = await asyncio.to_thread(pipelines.build, self.server.pipeline_name, cfg, self.info)
        self.pipeline = Pipeline(stages, self._sink)
        await self.pipeline.start()
        # The LLM settles its system prompt in start() (tools on or off): wait for every
        # stage to have started before reporting it as the session's instructions.
        started = asyncio.gather(*(st.started.wait() for st in stages))
        failed = asyncio.ensure_future(self.pipeline.done.wait())
        await asyncio.wait((started, failed), return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        failed.cancel()
        for stage in stages:  # the ASR's and the LLM's shared turn ids (response.create's too)
            turns = getattr(stage, "turns", None)
            if isinstance(turns, TurnCounter):
                self._turns = turns
            system = getattr(stage, "system_text", None)
            if system is not None:  # the LLM: its instructions are the session's to start with
                self.rt.config = dataclasses.replace(self.rt.config, instructions=system())
        self._events(self.rt.start())
        tasks = [
            asyncio.create_task(self._recv_loop(), name=f"rt-recv:{self.id}"),
            asyncio.create_task(self._send_loop(), name=f"rt-send:{self.id}"),
            asyncio.create_task(self._act_loop(), name=f"rt-act:{self.id}"),
            asyncio.create_task(self._ended.wait(), name=f"ended:{self.id}"),
            asyncio.create_task(self.pipeline.done.wait(), name=f"done:{self.id}"),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for t in tasks[:3]:
            exc = None if t.cancelled() else t.exception()
            if exc is not None:
                raise exc

    # ------------------------------------------------------------------ the three loops

    async def _recv_loop(self) -> None:
        idle = self.cfg.server.idle_timeout_s
        while True:
            try:
                data = await asyncio.wait_for(self.ws.recv(), idle)
            except asyncio.TimeoutError:
                msg = f"nothing received for {idle:g} s"
                raise P.ProtocolError(msg, P.CLOSE_IDLE_TIMEOUT) from None
            self._events(self.rt.receive(data))
            while self._actions.qsize() > _ACTIONS_HIGH:  # the pipeline is behind: wait
                self._room.clear()
                await self._room.wait()

    async def _send_loop(self) -> None:
        while True:
            await self._send(await self._outbox.get())

    async def _act_loop(self) -> None:
        assert self.pipeline is not None
        while True:
            item = await self._actions.get()
            if self._actions.qsize() < _ACTIONS_HIGH // 2:
                self._room.set()
            if isinstance(item, Frame):
                await self.pipeline.put(item)
            elif isinstance(item, R.AppendAudio):
                pcm = np.frombuffer(item.pcm[: len(item.pcm) // 2 * 2], "<i2")
                assert self._resampler is not None
                f32 = pcm.astype(np.float32) / np.float32(32768.0)
                await self._emit_audio(self._resampler.resample_chunk(f32))
            elif isinstance(item, R.CancelResponse):
                turn = self._resp_turn.get(item.response_id)
                if turn is not None:  # (the barge-in stage may have done it already)
                    await self.pipeline.interrupt(turn + 1, item.reason)

    # ------------------------------------------------------------------ session outputs

    def _events(self, outs: list[R.Out], turn: int | None = None) -> None:
        """Queue what the session said: events for the client, actions for the pipeline.
        ``turn``: the pipeline turn already generating a response started here."""
        for o in outs:
            if isinstance(o, R.ServerEvent):
                self._outbox.put_nowait(R.encode_server_event(o))
            else:
                self._act(o, turn)

    def _act(self, a: R.Action, turn: int | None) -> None:
        if isinstance(a, R.AppendAudio | R.CancelResponse):
            self._actions.put_nowait(a)
        elif isinstance(a, R.Configure):
            self._configure(a.config)
        elif isinstance(a, R.CommitAudio):
            self._commits.commit(a.item_id)
            self._untranscribed.add(a.item_id)
            self._actions.put_nowait(TurnControl(action="commit", key=a.item_id))
        elif isinstance(a, R.ClearAudio):
            self._commits.clear()
            self._actions.put_nowait(TurnControl(action="clear"))
        elif isinstance(a, R.AddItem):
            msg = chat_message(a.item)
            if msg is not None and a.item.id is not None:
                self._actions.put_nowait(ContextEdit(key=a.item.id, message=msg))
        elif isinstance(a, R.DeleteItem):
            self._actions.put_nowait(ContextEdit(key=a.item_id))
        elif isinstance(a, R.StartResponse):
            self._start(a, turn)
        elif isinstance(a, R.SetHeard):
            t = self._resp_turn.get(a.response_id)
            if t is not None:
                self._actions.put_nowait(ReplyHeard(turn_id=t, text=a.text))

    def _configure(self, c: R.SessionConfig) -> None:
        td = c.turn_detection
        self._auto = td is not None and bool(td.create_response)
        self._actions.put_nowait(
            SessionSetup(
                vad=c.vad_overrides() or None,
                eagerness=c.eagerness(),
                barge_in=td is not None and bool(td.interrupt_response),
                auto_reply=self._auto,
                system_prompt=c.instructions,
                client_tools=_specs(c.tools, c.tool_choice),
                max_new_tokens=token_budget(c.max_output_tokens),
            )
        )

    def _start(self, a: R.StartResponse, turn: int | None) -> None:
        if turn is None and a.after_item_id is not None and self._auto:
            turn = self._item_turn.get(a.after_item_id)  # server_vad: the LLM already replies
        if turn is not None:
            self._bind(a.response_id, turn)
            return
        if self._untranscribed:  # the user's words must reach the LLM before the reply
            self._held.append(a)
            return
        c = self.rt.config
        same = a.tools == c.tools and a.tool_choice == c.tool_choice
        t = self._turns.next()
        self._bind(a.response_id, t)
        self._actions.put_nowait(
            Respond(
                turn_id=t,
                instructions=a.instructions if a.instructions != c.instructions else None,
                client_tools=None if same else _specs(a.tools, a.tool_choice),
                max_new_tokens=token_budget(a.max_output_tokens),
            )
        )

    def _bind(self, response_id: str, turn: int) -> None:
        self._resp_turn[response_id] = turn
        self._turn_resp[turn] = response_id
        self._heard_turns.append(turn)
        while len(self._heard_turns) > _KEEP_TURNS:
            old = self._heard_turns.pop(0)
            rid = self._turn_resp.pop(old, None)
            if rid is not None:
                self._resp_turn.pop(rid, None)

    def _transcribed(self, item_id: str, text: str) -> None:
        """A committed item's transcript is final: the session says so, and where the LLM
        does not reply by itself the words become its user message."""
        self._events(self.rt.transcript_done(item_id, text))
        if item_id in self._untranscribed:
            self._untranscribed.discard(item_id)
            if text:
                msg = {"role": "user", "content": text}
                self._actions.put_nowait(ContextEdit(key=item_id, message=msg))
            if not self._untranscribed:
                held, self._held = self._held, []
                for a in held:
                    self._start(a, None)

    # ------------------------------------------------------------------ pipeline frames

    async def _sink(self, frame: Frame) -> None:
        self.server.metrics.observe(frame)
        try:
            self._on_frame(frame)
        except Exception:  # a bug of ours: this session ends (1011), not the pipeline's stage
            log.exception("realtime session %s: frame %s", self.id, type(frame).__name__)
            self.end(P.CLOSE_INTERNAL_ERROR, "pipeline error: internal error")
        self._track_turns(frame)

    def _audio_ms(self, media_ns: int) -> int:
        """An ASR media time as the API's audio ms (since the session's first sample)."""
        return max(0, (media_ns - self._asr_origin_ns) // 1_000_000)

    def _on_frame(self, f: Frame) -> None:
        t = f.turn_id
        resp = self._turn_resp.get(t)
        if isinstance(f, AudioOut):
            if resp is not None:
                self._events(self.rt.output_audio(f.pcm.astype("<i2").tobytes(), None, resp))
        elif isinstance(f, TextDelta):
            if resp is not None:
                self._events(self.rt.output_text(f.text, resp))
        elif isinstance(f, ToolCallOut):
            if resp is not None:
                self._events(self.rt.function_call(f.name, f.arguments, response_id=resp))
        elif isinstance(f, ReplyFinished):
            # Cut short, it was a barge-in (its Interrupt overtook the SpeechStart that the
            # session cancels the response on) or a cancel the session has already ended.
            if resp is not None and not f.interrupted:
                self._events(self.rt.response_finished(response_id=resp))
        elif isinstance(f, SpeechStart):
            self._on_speech_start(f)
        elif isinstance(f, SpeechEnd):
            self._on_speech_end(f)
        elif isinstance(f, TranscriptFinal):
            self._on_final(t, f.text.strip())
        elif isinstance(f, TurnControl) and f.action == "commit":
            self._complete(self._commits.reached(f.key))
        elif isinstance(f, SpanFrame):
            self._on_span(f, resp)
        elif isinstance(f, Alert):
            self._events(self.rt.server_response(), turn=t)
        elif isinstance(f, ErrorFrame):
            if resp is not None:
                self._events(self.rt.response_failed(f.message[:300], resp))
            if f.fatal:
                self.end(P.CLOSE_INTERNAL_ERROR, f"pipeline error: {f.code}")

    def _on_speech_start(self, f: SpeechStart) -> None:
        if self.rt.config.turn_detection is None:
            self._commits.heard(f.turn_id)
            return
        self._events(self.rt.speech_started(self._audio_ms(f.media_ns)))
        item = self.rt.input.speech_item
        if item is not None:
            self._turn_item[f.turn_id] = item
            self._item_turn[item] = f.turn_id

    def _on_speech_end(self, f: SpeechEnd) -> None:
        if self.rt.config.turn_detection is None:
            if not f.accepted:
                self._complete(self._commits.final(f.turn_id, ""))
            return
        item = self._turn_item.get(f.turn_id)
        if item is None or self.rt.input.speech_item != item:
            return  # cleared, or a turn of the manual mode's time
        if not f.accepted:
            self._turn_item.pop(f.turn_id, None)
            self._item_turn.pop(item, None)
            self._events(self.rt.speech_discarded(self._audio_ms(f.media_ns)))
            return
        if not self._auto:
            self._untranscribed.add(item)
        self._events(self.rt.speech_stopped(self._audio_ms(f.media_ns)))

    def _on_final(self, turn: int, text: str) -> None:
        item = self._turn_item.pop(turn, None)
        if item is not None:
            self._item_turn.pop(item, None)
            self._transcribed(item, text)
            resp = self._turn_resp.get(turn)
            if not text and resp is not None:  # the LLM ignores an empty final: end it here
                self._events(self.rt.response_finished(response_id=resp))
            return
        self._complete(self._commits.final(turn, text))  # a manual-mode turn

    def _complete(self, items: list[tuple[str, str]]) -> None:
        for item_id, text in items:
            self._transcribed(item_id, text)

    def _on_span(self, f: SpanFrame, resp: str | None) -> None:
        self.server.tracer.add(f, session=self.id)
        if f.name == "asr.final" and f.attrs.get("empty"):
            self._on_final(f.turn_id, "")
        elif resp is not None and f.name in ("llm.ttft", "llm.tpot"):
            r = self.rt.response
            if r is None or r.id != resp:
                return
            u = r.usage or R.Usage()
            if f.name == "llm.ttft":
                u = R.Usage(input_text_tokens=int(f.attrs.get("prompt_tokens", 0)),
                            output_text_tokens=u.output_text_tokens)  # fmt: skip
            else:
                u = R.Usage(input_text_tokens=u.input_text_tokens,
                            output_text_tokens=int(f.attrs.get("tokens", 0)))  # fmt: skip
            self.rt.note_usage(u, resp)


def _specs(tools: tuple[FunctionTool, ...], choice: ToolChoice) -> list[dict[str, typing.Any]]:
    """The client's tools as the LLM shows them (``tool_choice: none``: none at all; a forced
    choice cannot be forced on this decoder: the model is shown the tools and decides)."""
    return [] if choice.mode == "none" else [tool_spec(t) for t in tools]
