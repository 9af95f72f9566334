"""One WebSocket connection: hello (admission), one Pipeline, wire ↔ frames, clean teardown.

The connection is a ``MessageTransport`` (server/transport.py): whole messages in
and out, close, abort; the session knows no WebSocket library or ASGI server.

Whatever a client does (garbage, oversize messages, vanishing mid-stream,
never reading), only its own session ends, with a close code from
docs/PROTOCOL.md, and every task the session started is reaped before ``run``
returns. A connection is only a session once the server admits its hello
(core/wire/admission.py); until then it holds no pipeline and no session slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import typing
import uuid
from collections import deque
from typing import TYPE_CHECKING

import numpy as np
import soxr

from voicepipe import pipelines
from voicepipe.clock import now_ns
from voicepipe.core.turns.activity import VoiceActivity
from voicepipe.core.wire import protocol as P
from voicepipe.core.wire.admission import Ticket
from voicepipe.core.wire.session_rules import ServerLimits, ServerRules
from voicepipe.frames import (
    Alert,
    AudioIn,
    ErrorFrame,
    Frame,
    InputEnd,
    Interrupt,
    MetricsFrame,
    PlaybackReport,
    SpanFrame,
    SpeechEnd,
    SpeechStart,
    TextDelta,
    TranscriptFinal,
    TranscriptPartial,
)
from voicepipe.pipeline import Pipeline
from voicepipe.server.transport import MessageTransport, TransportClosed
from voicepipe.stages.output import AudioOut, ReplyFinished, ReplyStarted
from voicepipe.tracing import E2E_VOICE_TO_VOICE

if TYPE_CHECKING:
    from voicepipe.server.app import Server

log = logging.getLogger(__name__)
MAX_GAP_S = 1.0  # a jump in input media_ts is filled with at most this much silence
CLOSE_WAIT_S = 3.0  # to hand the close frame over; a client that stopped reading never takes it


class SlowClient(Exception):
    """The client did not take one message within ``server.send_timeout_s``."""


class Session:
    endpoint = "/ws"  # where it was opened (the operator's logs and traces say so)

    def __init__(self, server: Server, ws: MessageTransport, ticket: Ticket) -> None:
        self.server = server
        self.cfg = server.cfg
        self.ws = ws
        self.ticket = ticket
        self.admitted = False  # its hello was accepted: it holds a session slot
        # A replica of a cluster prefixes its own name: which replica a session lives on.
        self.id = server.session_prefix + uuid.uuid4().hex[:12]
        self.start_ns = now_ns()
        c = self.cfg.server
        # Hello first and once, message order, deadlines: core/wire/session_rules.py.
        self.rules = ServerRules(
            ServerLimits(
                hello_timeout_ns=round(c.hello_timeout_s * 1e9),
                idle_timeout_ns=round(c.idle_timeout_s * 1e9),
                token=c.auth_token,
            ),
            self.start_ns,
        )
        self._draining = False  # the server is shutting down: end once no reply is in flight
        self._open_turns: set[int] = set()  # turns with a final transcript or reply in flight
        self._input_ended = False  # the client sent "end": done + 1000 follow by themselves
        self.info: pipelines.SessionInfo | None = None
        self.pipeline: Pipeline | None = None
        self.close_code = P.CLOSE_NORMAL
        self.close_reason = P.CLOSE_REASONS[P.CLOSE_NORMAL]
        self._ended = asyncio.Event()  # the session should close now (done or fatal error)
        self._turn = 0  # newest turn the client interrupted into; stamps AudioIn
        self._in_next_ts: int | None = None
        self._in_seq = 0
        self._resampler: soxr.ResampleStream | None = None
        self._asr_samples = 0  # AudioIn samples produced so far
        self._asr_origin_ns = 0  # input media time of the first AudioIn sample
        # (input media ns at the end of a received frame, server time it arrived), recent
        self._arrivals: deque[tuple[int, int]] = deque(maxlen=3000)
        self._speech_end_ns: dict[int, int] = {}  # turn → arrival of its last speech sample
        self._activity = VoiceActivity()  # heard or answered: voice_active

    # ------------------------------------------------------------------ lifecycle

    def _set_close(self, code: int, reason: str) -> None:
        if self.close_code == P.CLOSE_NORMAL:
            self.close_code, self.close_reason = code, reason

    def end(self, code: int, reason: str) -> None:
        """Close this session soon with ``code`` (eviction, shutdown): from outside."""
        self._set_close(code, reason)
        self._ended.set()

    def drain(self) -> None:
        """The server is shutting down: finish the reply in flight, if any, then 1001."""
        self._draining = True
        if not self.admitted or not (self._open_turns or self._input_ended):
            self.end(P.CLOSE_GOING_AWAY, P.CLOSE_REASONS[P.CLOSE_GOING_AWAY])

    async def run(self) -> None:
        """The connection from its first message to its close: ``_converse`` speaks the
        endpoint's protocol; every way it can end maps to a close code here."""
        try:
            await self._converse()
        except P.ProtocolError as e:
            self._set_close(e.code, f"{P.CLOSE_REASONS.get(e.code, 'error')}: {e.reason}")
        except SlowClient:
            self._set_close(P.CLOSE_POLICY, "policy violation: client not reading")
        except TransportClosed:
            pass
        except Exception as e:  # a bug of ours: this session ends with 1011, never 1000
            log.exception("session %s failed", self.id)
            self._set_close(P.CLOSE_INTERNAL_ERROR, "pipeline error: internal error")
            with contextlib.suppress(Exception):
                await self._report_internal(e)
        finally:
            if self.pipeline is not None:
                await self.pipeline.stop(timeout=1.0)
            await self._close_socket()

    async def _converse(self) -> None:
        """Protocol v1: the hello (admission), then the session."""
        hello = await self._race_ended(self._hello())
        if hello is not None:
            await self._run(hello)

    async def _report_internal(self, e: Exception) -> None:
        """Tell the client of a failure of ours before the 1011 close."""
        await self._send_msg(P.Error(code="internal_error", message=repr(e)[:300], fatal=True))

    async def _close_socket(self) -> None:
        reason = P.ProtocolError(self.close_reason).close_reason
        try:
            # The close frame waits behind the unsent data, which never goes for a client
            # that stopped reading: bounded, then the TCP connection is cut.
            await asyncio.wait_for(self.ws.close(self.close_code, reason), CLOSE_WAIT_S)
        except TransportClosed:
            pass
        except asyncio.TimeoutError:
            self.ws.abort()

    async def _race_ended(self, coro: typing.Coroutine) -> typing.Any:
        """``await coro`` unless the session is ended from outside first (then None)."""
        task = asyncio.ensure_future(coro)
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            await asyncio.wait((task, ended), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (task, ended):
                t.cancel()
            await asyncio.gather(task, ended, return_exceptions=True)
        if task.cancelled():
            return None
        return task.result()  # raises what _hello raised

    async def _run(self, hello: P.Hello) -> None:
        cfg = self.cfg
        self.info = pipelines.SessionInfo(
            session_id=self.id,
            input_sample_rate=hello.sample_rate,
            asr_sample_rate=cfg.audio.asr_sample_rate,
            output_sample_rate=hello.output_sample_rate or cfg.audio.output_sample_rate,
            frame_ms=cfg.audio.frame_ms,
            client=hello.client,
            pipeline=self.server.pipeline_name,
        )
        if hello.sample_rate != cfg.audio.asr_sample_rate:
            # vr=True: the default engine emits in ~30 ms blocks (48 → 16 kHz), which would
            # hold back the VAD and endpointer by up to a block (see stages/output.py).
            self._resampler = soxr.ResampleStream(
                hello.sample_rate,
                cfg.audio.asr_sample_rate,
                1,
                dtype="float32",
                quality="HQ",
                vr=True,
            )
        try:
            # Constructors may load models: keep that off the loop other sessions run on.
            stages = await asyncio.to_thread(
                pipelines.build, self.server.pipeline_name, cfg, self.info
            )
        except Exception as e:
            log.exception("session %s: building pipeline failed", self.id)
            await self._send_msg(P.Error(code="stage_error", message=str(e)[:300], fatal=True))
            raise P.ProtocolError(str(e), P.CLOSE_INTERNAL_ERROR) from None
        self.pipeline = Pipeline(stages, self._sink)
        await self._send_msg(
            P.HelloAck(
                session_id=self.id,
                pipeline=self.server.pipeline_name,
                input_sample_rate=hello.sample_rate,
                output_sample_rate=self.info.output_sample_rate,
                frame_ms=cfg.audio.frame_ms,
                max_message_bytes=cfg.server.max_message_bytes,
                idle_timeout_s=cfg.server.idle_timeout_s,
            )
        )
        await self.pipeline.start()
        recv = asyncio.create_task(self._recv_loop(), name=f"recv:{self.id}")
        ended = asyncio.create_task(self._ended.wait(), name=f"ended:{self.id}")
        stopped = asyncio.create_task(self.pipeline.done.wait(), name=f"done:{self.id}")
        tasks = (recv, ended, stopped)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        exc = None if recv.cancelled() else recv.exception()
        if exc is not None:
            raise exc  # ProtocolError → its close code; TransportClosed → quiet

    async def _receive(self) -> P.Message | P.AudioFrame | None:
        """The next message, checked against the session rules (None: drop it)."""
        wait_s = max(0.0, (self.rules.deadline_ns() - now_ns()) / 1e9)
        try:
            data = await asyncio.wait_for(self.ws.recv(), wait_s)
        except asyncio.TimeoutError:
            raise self.rules.expired() from None
        return self.rules.receive(P.decode(data), now_ns())

    async def _hello(self) -> P.Hello:
        msg = await self._receive()
        assert isinstance(msg, P.Hello)  # the rules accept nothing else first
        refusal = self.server.admit(self)
        if refusal is not None:
            retry = self.cfg.server.retry_after_s
            text = f"{refusal.value}; retry in {retry:g} s"
            await self._send_msg(
                P.Error(code="too_many_sessions", message=text, fatal=True, retry_after_s=retry)
            )
            detail = text.removeprefix(P.CLOSE_REASONS[P.CLOSE_TOO_MANY_SESSIONS])
            raise P.ProtocolError(detail.lstrip(" ;"), P.CLOSE_TOO_MANY_SESSIONS)
        self.admitted = True
        return msg

    async def _recv_loop(self) -> None:
        assert self.pipeline is not None
        while True:
            msg = await self._receive()
            if msg is None:
                continue
            if isinstance(msg, P.AudioFrame):
                await self._on_audio(msg)
            elif isinstance(msg, P.InterruptMsg):
                # The client names the newest turn it wants stopped; Interrupt(t) drops < t.
                self._turn = max(self._turn, msg.turn_id + 1)
                await self.pipeline.interrupt(self._turn, msg.reason or "client")
            elif isinstance(msg, P.Playback):
                await self._on_playback(msg)
            elif isinstance(msg, P.EndInput):
                self._input_ended = True
                await self._flush_input()
                await self.pipeline.put(InputEnd(turn_id=self._turn))

    # ------------------------------------------------------------------ input

    async def _on_audio(self, frame: P.AudioFrame) -> None:
        assert self.pipeline is not None and self.info is not None
        rate = self.info.input_sample_rate
        pcm = frame.float32()
        if self._in_next_ts is None:
            self._asr_origin_ns = frame.media_ts * 1_000_000_000 // rate
        elif frame.media_ts > self._in_next_ts:  # a gap in time: fill it with silence
            gap = min(frame.media_ts - self._in_next_ts, int(MAX_GAP_S * rate))
            pcm = np.concatenate([np.zeros(gap, np.float32), pcm])
        self._in_next_ts = frame.media_ts + len(frame.pcm)
        self._arrivals.append((self._in_next_ts * 1_000_000_000 // rate, now_ns()))
        if self._resampler is not None:
            pcm = self._resampler.resample_chunk(pcm)
        await self._emit_audio(pcm)

    async def _flush_input(self) -> None:
        if self._resampler is not None:
            await self._emit_audio(
                self._resampler.resample_chunk(np.zeros(0, np.float32), last=True)
            )
            self._resampler = None

    async def _emit_audio(self, pcm: np.ndarray) -> None:
        assert self.pipeline is not None and self.info is not None
        if len(pcm) == 0:
            return
        asr_rate = self.info.asr_sample_rate
        media_ns = self._asr_origin_ns + self._asr_samples * 1_000_000_000 // asr_rate
        self._asr_samples += len(pcm)
        await self.pipeline.put(
            AudioIn(
                turn_id=self._turn,
                pcm=pcm,
                sample_rate=asr_rate,
                media_ns=media_ns,
                seq=self._in_seq,
            )
        )
        self._in_seq += 1

    def _arrival_ns(self, media_ns: int) -> int | None:
        """When the input frame holding media time ``media_ns`` reached the server."""
        for end_media, arrived in self._arrivals:
            if end_media >= media_ns:
                return arrived
        return None

    async def _on_playback(self, msg: P.Playback) -> None:
        assert self.pipeline is not None
        report = self._playback(msg)
        self.server.metrics.playback(
            self.id,
            msg.turn_id,
            msg.counters,
            msg.done,
            age_ms=(now_ns() - self.start_ns) / 1e6,
            frame_ms=self.cfg.audio.frame_ms,
        )
        if msg.done:
            self.server.turns.played(self.id, msg.turn_id)
        speech_end = self._speech_end_ns.pop(msg.turn_id, None)
        if report.first_play_ns is not None and speech_end is not None:
            # The server's view of e2e.voice_to_voice: the speech-end sample's arrival →
            # the reply's first sample played, per the client's report (network one way
            # is not in it; the headless client measures the full span itself).
            span = SpanFrame(
                turn_id=msg.turn_id,
                name=E2E_VOICE_TO_VOICE,
                start_ns=speech_end,
                end_ns=report.first_play_ns,
                attrs={"measured_by": "server"},
            )
            await self._sink(span)
        await self.pipeline.put(report)

    def _playback(self, msg: P.Playback) -> PlaybackReport:
        first = None
        if msg.first_play_ms is not None:
            # Client clock → ours: only the difference of its two readings is used.
            first = now_ns() - round((msg.now_ms - msg.first_play_ms) * 1e6)
        return PlaybackReport(
            turn_id=msg.turn_id,
            reply_turn=msg.turn_id,
            played_samples=msg.played_samples,
            sample_rate=msg.sample_rate,
            first_play_ns=first,
            done=msg.done,
        )

    # ------------------------------------------------------------------ output

    async def _send_msg(self, msg: P.Message) -> None:
        await self._send(P.encode_message(msg))

    async def _send(self, data: str | bytes) -> None:
        # A client that stops reading fills the socket's buffers, and then send waits
        # forever, holding its slot and its pipeline: bounded here instead.
        try:
            await asyncio.wait_for(self.ws.send(data), self.cfg.server.send_timeout_s)
        except asyncio.TimeoutError:
            raise SlowClient from None

    @property
    def turn_in_flight(self) -> bool:
        return bool(self._open_turns)

    @property
    def age_s(self) -> float:
        return (now_ns() - self.start_ns) / 1e9

    def _ms(self, t_ns: int) -> float:
        assert self.info is not None
        return (t_ns - self.info.start_ns) / 1e6

    async def _sink(self, frame: Frame) -> None:
        """End of the pipeline → client. A closed socket just drops what follows."""
        try:
            await self._deliver(frame)
        except TransportClosed:
            self._ended.set()
        except SlowClient:
            self.end(P.CLOSE_POLICY, "policy violation: client not reading")
        self._track_turns(frame)
        self._track_hearing(frame)

    def _track_hearing(self, frame: Frame) -> None:
        if isinstance(frame, SpeechStart):
            self._activity.speech_started()
        elif isinstance(frame, SpeechEnd):
            self._activity.speech_ended(now_ns())
        elif isinstance(frame, (TranscriptFinal, Interrupt)):
            self._activity.final_heard()

    @property
    def voice_active(self) -> bool:
        """A voice turn is being heard or answered (core/turns/activity.py): the /v1 API's
        work yields to it (stages/llm/voice_first.py)."""
        return self._activity.active(now_ns(), bool(self._open_turns))

    def _track_turns(self, frame: Frame) -> None:
        """Which replies are in flight, so a shutdown can let them finish."""
        if isinstance(frame, (TranscriptFinal, ReplyStarted)):
            self._open_turns.add(frame.turn_id)
        elif isinstance(frame, ReplyFinished):
            self._open_turns.discard(frame.turn_id)
        elif isinstance(frame, Interrupt):
            self._open_turns = {t for t in self._open_turns if t >= frame.turn_id}
        else:
            return
        if self._draining and not (self._open_turns or self._input_ended or self._ended.is_set()):
            self.end(P.CLOSE_GOING_AWAY, P.CLOSE_REASONS[P.CLOSE_GOING_AWAY])

    async def _deliver(self, frame: Frame) -> None:
        t = frame.turn_id
        self.server.metrics.observe(frame)
        if isinstance(frame, AudioOut):
            await self._send(
                P.encode_audio(
                    P.AudioFrame(
                        kind=P.KIND_AUDIO_OUT,
                        seq=frame.seq,
                        media_ts=frame.media_ts,
                        pcm=frame.pcm,
                        turn_id=t,
                        flags=P.FLAG_LAST if frame.last else 0,
                    )
                )
            )
        elif isinstance(frame, ReplyStarted):
            await self._send_msg(
                P.ReplyStart(turn_id=t, media_ts=frame.media_ts, sample_rate=frame.sample_rate)
            )
        elif isinstance(frame, ReplyFinished):
            self.server.turns.reply(self.id, t, frame.text, frame.interrupted)
            await self._send_msg(
                P.ReplyEndMsg(
                    turn_id=t, text=frame.text, samples=frame.samples, interrupted=frame.interrupted
                )
            )
        elif isinstance(frame, TextDelta):
            await self._send_msg(P.ReplyText(turn_id=t, delta=frame.text))
        elif isinstance(frame, TranscriptPartial):
            await self._send_msg(P.Transcript(turn_id=t, text=frame.text))
        elif isinstance(frame, TranscriptFinal):
            self.server.turns.transcript(self.id, t, frame.text)
            arrived = self._arrival_ns(frame.speech_end_media_ns)
            if arrived is not None:
                self._speech_end_ns[t] = arrived
            await self._send_msg(
                P.Transcript(
                    turn_id=t,
                    text=frame.text,
                    final=True,
                    speech_end_ms=frame.speech_end_media_ns / 1e6,
                )
            )
        elif isinstance(frame, SpanFrame):
            self.server.turns.span(self.id, self.server.tracer.add(frame, session=self.id))
            await self._send_msg(
                P.Span(
                    turn_id=t,
                    name=frame.name,
                    start_ms=self._ms(frame.start_ns),
                    duration_ms=frame.duration_ms,
                    attrs=_json_attrs(frame.attrs),
                )
            )
        elif isinstance(frame, MetricsFrame):
            values = {k: float(v) for k, v in frame.values.items()}
            await self._send_msg(P.Metrics(turn_id=t, source=frame.source, values=values))
        elif isinstance(frame, Interrupt):
            await self._send_msg(P.InterruptMsg(turn_id=t, reason=frame.reason))
        elif isinstance(frame, ErrorFrame):
            await self._send_msg(
                P.Error(code=frame.code, message=frame.message[:500], fatal=frame.fatal)
            )
            if frame.fatal:
                self._set_close(P.CLOSE_INTERNAL_ERROR, f"pipeline error: {frame.code}")
                self._ended.set()
        elif isinstance(frame, Alert):
            data = _json_attrs(frame.data)
            await self._send_msg(P.AlertMsg(turn_id=t, kind=frame.kind, text=frame.text, data=data))
        elif isinstance(frame, InputEnd):
            await self._send_msg(P.Done())
            self._ended.set()
        # Anything else (SpeechStart, TextChunk, End, …) is internal to the pipeline.


def _json_attrs(attrs: dict) -> dict:
    out = {}
    for k, v in attrs.items():
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and not np.isfinite(v):
            v = None
        plain = isinstance(v, (str, int, float, bool, list, dict, type(None)))
        out[str(k)] = v if plain else str(v)
    return out
