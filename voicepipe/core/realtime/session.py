"""One Realtime API session as a sans-I/O state machine: events in, events and actions out.

No sockets, no clocks, no asyncio. The shell (the server's ``/v1/realtime`` handler)
feeds it two kinds of input and executes what comes back, in order:

- what the client sent: ``receive(text)`` (or ``handle(event)``), and
- what the pipeline did: ``speech_started`` / ``speech_stopped`` (the endpointer),
  ``transcript_delta`` / ``transcript_done`` / ``transcript_failed`` (the ASR),
  ``output_text`` / ``output_audio`` / ``function_call_*`` / ``response_finished``
  (the LLM and the TTS), ``note_usage``.

Each call returns a list whose elements are ``ServerEvent``s (encode and send them)
or ``Action``s (tell the pipeline). Times are media times in milliseconds on the
input audio's timeline (what the API's ``audio_start_ms`` / ``audio_end_ms`` mean),
so nothing here needs a clock. Audio is PCM16 mono at 24 kHz both ways.

Barge-in follows the API: with ``server_vad`` and ``interrupt_response`` (the
default) speech start cancels the response in progress (``response.done`` with
status ``cancelled``, reason ``turn_detected``); the client then says how much it
played with ``conversation.item.truncate``, which maps onto voicepipe's "heard"
trimming (core/turns/heard.py): the assistant item keeps only the words whose audio was
played, and a ``SetHeard`` action tells the LLM to keep only those too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from voicepipe.core.realtime import server_events as S
from voicepipe.core.realtime.actions import (
    AddItem,
    AppendAudio,
    CancelResponse,
    ClearAudio,
    CommitAudio,
    Configure,
    DeleteItem,
    Out,
    SetHeard,
    StartResponse,
)
from voicepipe.core.realtime.config import DEFAULT_VAD, apply_patch
from voicepipe.core.realtime.decode import decode_client_event
from voicepipe.core.realtime.events import (
    BYTES_PER_MS,
    ClientEvent,
    ContentPart,
    FunctionCallItem,
    InputAudioAppend,
    InputAudioClear,
    InputAudioCommit,
    Item,
    ItemCreate,
    ItemDelete,
    ItemRetrieve,
    ItemTruncate,
    MessageItem,
    OutputAudioClear,
    RealtimeError,
    ResponseCancel,
    ResponseCreate,
    SessionUpdate,
    Transcription,
    TurnDetection,
)
from voicepipe.core.realtime.items import Conversation, OpenResponse, item_added_events

MIN_COMMIT_MS = 100  # the API refuses to commit less audio than this
KEEP_ITEM_MS = 64  # user items whose audio length a later transcript can still report


# ---------------------------------------------------------------- the session


@dataclass
class _Ids:
    """Ids unique within the session: ``<prefix>_<session tag><counter>``. Deterministic, so
    tests can name them; the session tag keeps two sessions' ids apart in logs."""

    tag: str
    n: int = 0

    def new(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.tag}{self.n:06d}"


@dataclass
class _Input:
    """The input audio buffer: bytes since the last commit / clear, and the open speech."""

    buffered: int = 0  # bytes appended since the last commit or clear
    total: int = 0  # bytes appended during the session
    speech_item: str | None = None  # item id announced by speech_started
    speech_start_ms: int = 0
    item_ms: dict[str, int] = field(default_factory=dict)  # user item → its audio length


class RealtimeSession:
    def __init__(
        self,
        *,
        session_id: str,
        model: str = "voicepipe",
        instructions: str = "",
        voice: str = "alloy",
        transcription_model: str | None = "whisper",
        vad: TurnDetection = DEFAULT_VAD,
        legacy_item_created: bool = True,
    ) -> None:
        self.ids = _Ids(tag=session_id.removeprefix("sess_")[:12])
        self.config = S.SessionConfig(
            id=session_id,
            model=model,
            instructions=instructions,
            voice=voice,
            turn_detection=vad,
            transcription=Transcription(model=transcription_model) if transcription_model else None,
        )
        # GA sends conversation.item.added/done; beta clients (and the event list)
        # know conversation.item.created: sent too unless turned off. Idempotent by item id.
        self.legacy_item_created = legacy_item_created
        self.conversation = Conversation()
        self.input = _Input()
        self.response: OpenResponse | None = None
        self.audio_sent = False  # the voice is fixed once any audio went out (API rule)

    def _eid(self) -> str:
        return self.ids.new("event")

    # ------------------------------------------------------------ client side

    def start(self) -> list[Out]:
        """The first thing sent on a new connection."""
        return [S.SessionCreated(event_id=self._eid(), session=self.config), Configure(self.config)]

    def receive(self, data: str | bytes) -> list[Out]:
        """One WebSocket text message. Bad input → one ``error`` event, never an exception."""
        try:
            return self.handle(decode_client_event(data))
        except RealtimeError as e:
            return [S.ErrorEvent(event_id=self._eid(), error=e)]

    def handle(self, ev: ClientEvent) -> list[Out]:
        try:
            return self._dispatch(ev)
        except RealtimeError as e:
            e.event_id = e.event_id or ev.event_id
            return [S.ErrorEvent(event_id=self._eid(), error=e)]

    def _dispatch(self, ev: ClientEvent) -> list[Out]:
        if isinstance(ev, InputAudioAppend):
            self.input.buffered += len(ev.audio)
            self.input.total += len(ev.audio)
            return [AppendAudio(ev.audio)] if ev.audio else []
        if isinstance(ev, SessionUpdate):
            self.config = apply_patch(self.config, ev.session, audio_sent=self.audio_sent)
            return [
                Configure(self.config),
                S.SessionUpdated(event_id=self._eid(), session=self.config),
            ]
        if isinstance(ev, InputAudioCommit):
            return self._commit_manual()
        if isinstance(ev, InputAudioClear):
            self.input.buffered = 0
            self.input.speech_item = None
            return [ClearAudio(), S.BufferCleared(event_id=self._eid())]
        if isinstance(ev, ItemCreate):
            return self._create_item(ev)
        if isinstance(ev, ItemTruncate):
            return self._truncate(ev)
        if isinstance(ev, ItemDelete):
            self.conversation.delete(ev.item_id)
            return [DeleteItem(ev.item_id), S.ItemDeleted(event_id=self._eid(), item_id=ev.item_id)]
        if isinstance(ev, ItemRetrieve):
            return [S.ItemRetrieved(event_id=self._eid(), item=self.conversation.get(ev.item_id))]
        if isinstance(ev, ResponseCreate):
            return self._create_response(ev)
        if isinstance(ev, ResponseCancel):
            r = self.response
            if r is None or (ev.response_id is not None and ev.response_id != r.id):
                raise RealtimeError(
                    "response_cancel_not_active", "Cancellation failed: no active response found."
                )
            return self._cancel("client_cancelled")
        if isinstance(ev, OutputAudioClear):
            raise RealtimeError(
                "unsupported_event",
                "output_audio_buffer.clear is for WebRTC/SIP "
                "only; over WebSocket send response.cancel and "
                "conversation.item.truncate.",
                param="type",
            )
        raise RealtimeError("invalid_value", f"Unsupported event {ev.TYPE!r}.")  # pragma: no cover

    # ------------------------------------------------------------ input audio

    def _commit(self, item_id: str, audio_ms: int) -> list[Out]:
        prev = self.conversation.last_id()
        item = MessageItem(
            role="user", content=(ContentPart(type="input_audio"),), id=item_id, status="completed"
        )
        self.conversation.add(item, None)
        self.input.item_ms[item_id] = audio_ms
        while len(self.input.item_ms) > KEEP_ITEM_MS:
            del self.input.item_ms[next(iter(self.input.item_ms))]
        self.input.buffered = 0
        self.input.speech_item = None
        out: list[Out] = [
            S.BufferCommitted(event_id=self._eid(), item_id=item_id, previous_item_id=prev)
        ]
        return out + self._item_events(item, prev, done=True)

    def _commit_manual(self) -> list[Out]:
        ms = self.input.buffered // BYTES_PER_MS
        if ms < MIN_COMMIT_MS:
            raise RealtimeError(
                "input_audio_buffer_commit_empty",
                "Error committing input "
                f"audio buffer: buffer too small. Expected at least "
                f"{MIN_COMMIT_MS}ms of audio, but buffer only has {ms}.00ms "
                "of audio.",
            )
        item_id = self.input.speech_item or self.ids.new("item")
        # The events first: the transcript that CommitAudio leads to must follow "committed".
        return [*self._commit(item_id, ms), CommitAudio(item_id)]

    def speech_started(self, audio_start_ms: int) -> list[Out]:
        """The endpointer heard speech start (media ms since the session's first sample)."""
        td = self.config.turn_detection
        if td is None:  # manual turns: the client decides; no VAD events
            return []
        item_id = self.ids.new("item")
        self.input.speech_item = item_id
        self.input.speech_start_ms = max(0, audio_start_ms)
        out: list[Out] = [
            S.SpeechStarted(
                event_id=self._eid(), audio_start_ms=max(0, audio_start_ms), item_id=item_id
            )
        ]
        if self.response is not None and td.interrupt_response:
            out += self._cancel("turn_detected")
        return out

    def speech_stopped(self, audio_end_ms: int) -> list[Out]:
        """The endpointer ended the turn: commit it and, if asked, start a response."""
        td = self.config.turn_detection
        item_id = self.input.speech_item
        if td is None or item_id is None:
            return []
        end = max(audio_end_ms, self.input.speech_start_ms)
        out: list[Out] = [S.SpeechStopped(event_id=self._eid(), audio_end_ms=end, item_id=item_id)]
        out += self._commit(item_id, end - self.input.speech_start_ms)
        if td.create_response and self.response is None:
            out += self._start_response(None, after_item_id=item_id)
        return out

    def speech_discarded(self, audio_end_ms: int) -> list[Out]:
        """The endpointer dropped the turn (too short to be speech: a click, a cough). The
        client saw speech_started, so it sees speech_stopped; no item is committed."""
        item_id = self.input.speech_item
        if self.config.turn_detection is None or item_id is None:
            return []
        self.input.speech_item = None
        end = max(audio_end_ms, self.input.speech_start_ms)
        return [S.SpeechStopped(event_id=self._eid(), audio_end_ms=end, item_id=item_id)]

    def transcript_delta(self, item_id: str, delta: str) -> list[Out]:
        if self.config.transcription is None or not self.conversation.has(item_id) or not delta:
            return []
        return [S.TranscriptionDelta(event_id=self._eid(), item_id=item_id, delta=delta)]

    def transcript_done(self, item_id: str, transcript: str) -> list[Out]:
        """The ASR's final text of a committed user item: it becomes the item's transcript."""
        if not self.conversation.has(item_id):
            return []  # deleted meanwhile
        self.conversation.set_transcript(item_id, transcript)
        if self.config.transcription is None:
            return []
        seconds = self.input.item_ms.pop(item_id, 0) / 1000.0
        return [
            S.TranscriptionCompleted(
                event_id=self._eid(),
                item_id=item_id,
                transcript=transcript,
                usage=S.DurationUsage(seconds=seconds),
            )
        ]

    def transcript_failed(self, item_id: str, message: str) -> list[Out]:
        if self.config.transcription is None or not self.conversation.has(item_id):
            return []
        err = S.FailureDetail(code="transcription_failed", message=message)
        return [S.TranscriptionFailed(event_id=self._eid(), item_id=item_id, error=err)]

    # ------------------------------------------------------------ conversation items

    def _item_events(self, item: Item, prev: str | None, *, done: bool) -> list[Out]:
        return list(
            item_added_events(self._eid, item, prev, legacy=self.legacy_item_created, done=done)
        )

    def _create_item(self, ev: ItemCreate) -> list[Out]:
        item = ev.item
        if item.id is not None and self.conversation.has(item.id):
            raise RealtimeError(
                "invalid_value", f"Item with id '{item.id}' already exists.", param="item.id"
            )
        if item.id is None:
            item = replace(item, id=self.ids.new("item"))
        item = replace(item, status="completed")
        prev = self.conversation.add(item, ev.previous_item_id)
        return [AddItem(item, ev.previous_item_id), *self._item_events(item, prev, done=True)]

    def _truncate(self, ev: ItemTruncate) -> list[Out]:
        spoken = self.conversation.spoken.get(ev.item_id)
        item = self.conversation.get(ev.item_id, "item_truncate_invalid_item_id", "truncating")
        if spoken is None or not isinstance(item, MessageItem) or item.role != "assistant":
            raise RealtimeError(
                "unsupported_content_type",
                "Only model output audio messages can be truncated.",
                param="item_id",
            )
        if ev.content_index != 0:
            raise RealtimeError(
                "invalid_value",
                "Invalid content_index: the item has one content part (0).",
                param="content_index",
            )
        if ev.audio_end_ms > spoken.ms:
            raise RealtimeError(
                "invalid_value",
                f"Audio content of {spoken.ms}ms is already shorter than {ev.audio_end_ms}ms.",
                param="audio_end_ms",
            )
        out: list[Out] = []
        if self.response is not None and self.response.owns(ev.item_id):
            out += self._cancel("client_cancelled")  # truncating what is still being said
        text = spoken.heard(ev.audio_end_ms)
        self.conversation.set_transcript(ev.item_id, text)
        spoken.truncate(ev.audio_end_ms, text)
        return out + [
            SetHeard(ev.item_id, spoken.response_id, text, ev.audio_end_ms),
            S.ItemTruncated(
                event_id=self._eid(),
                item_id=ev.item_id,
                content_index=0,
                audio_end_ms=ev.audio_end_ms,
            ),
        ]

    # ------------------------------------------------------------ responses

    def _create_response(self, ev: ResponseCreate) -> list[Out]:
        if self.response is not None:
            raise RealtimeError(
                "conversation_already_has_active_response",
                "Conversation "
                f"already has an active response in progress: "
                f"{self.response.id}. Wait until the response is finished "
                "before creating a new one.",
            )
        p = ev.response
        if p is not None:
            if p.conversation not in (None, "auto"):
                raise RealtimeError(
                    "invalid_value",
                    "Only conversation 'auto' is supported.",
                    param="response.conversation",
                )
            if p.output_modalities is not None and len(set(p.output_modalities)) != 1:
                raise RealtimeError(
                    "invalid_value",
                    "output_modalities is either ['audio'] or ['text'].",
                    param="response.output_modalities",
                )
            if p.voice is not None and p.voice != self.config.voice:
                raise RealtimeError(
                    "cannot_update_voice",
                    "Per-response voices are not supported.",
                    param="response.audio.output.voice",
                )
        return self._start_response(ev, after_item_id=None)

    def _start_response(self, ev: ResponseCreate | None, after_item_id: str | None) -> list[Out]:
        c = self.config
        p = ev.response if ev is not None else None
        r = OpenResponse(
            id=self.ids.new("resp"),
            conversation_id=f"conv_{self.ids.tag}",
            modalities=(p.output_modalities if p and p.output_modalities else c.output_modalities),
            max_output_tokens=(
                p.max_output_tokens
                if p and p.max_output_tokens is not None
                else c.max_output_tokens
            ),
            voice=c.voice,
            metadata=p.metadata if p else None,
            eid=self._eid,
            new_id=self.ids.new,
            conv=self.conversation,
            legacy_created=self.legacy_item_created,
        )
        self.response = r
        action = StartResponse(
            response_id=r.id,
            instructions=p.instructions if p and p.instructions is not None else c.instructions,
            output_modalities=r.modalities,
            max_output_tokens=r.max_output_tokens,
            tools=p.tools if p and p.tools is not None else c.tools,
            tool_choice=p.tool_choice if p and p.tool_choice is not None else c.tool_choice,
            after_item_id=after_item_id,
        )
        return [S.ResponseCreated(event_id=self._eid(), response=r.resource("in_progress")), action]

    def server_response(self) -> list[Out]:
        """A response the server starts unasked (a timer's alert being spoken); nothing while
        another response is in progress (that alert is then not heard here)."""
        if self.response is not None:
            return []
        return self._start_response(None, after_item_id=None)

    def _cancel(self, reason: str) -> list[Out]:
        r = self.response
        assert r is not None
        out: list[Out] = [CancelResponse(r.id, reason)]
        return out + self._finish("cancelled", reason)

    def _finish(
        self, status: str, reason: str | None, error: RealtimeError | None = None
    ) -> list[Out]:
        r = self.response
        assert r is not None
        item_status = "completed" if status == "completed" else "incomplete"
        out: list[Out] = [*r.close_item(item_status)]
        out.append(
            S.ResponseDone(
                event_id=self._eid(), response=r.resource(status, reason=reason, error=error)
            )
        )
        self.response = None
        return out

    def _open(self, response_id: str | None) -> OpenResponse | None:
        """The response pipeline output belongs to; None if it was cancelled (late output of a
        cancelled reply is dropped here, so the client never hears it)."""
        r = self.response
        if r is None or (response_id is not None and response_id != r.id):
            return None
        return r

    def output_text(self, delta: str, response_id: str | None = None) -> list[Out]:
        """Reply text (the transcript of the audio that follows, or the text reply)."""
        r = self._open(response_id)
        if r is None or not delta:
            return []
        return list(r.text(delta))

    def output_audio(
        self, pcm: bytes, spoken_text: str | None = None, response_id: str | None = None
    ) -> list[Out]:
        """Reply audio, PCM16 mono 24 kHz. ``spoken_text``: the text this audio says, when the
        TTS knows it (exact heard-trimming on truncate); else words are spread evenly."""
        r = self._open(response_id)
        if r is None or not pcm or "audio" not in r.modalities:
            return []
        self.audio_sent = True
        return list(r.audio(pcm, spoken_text))

    def function_call(
        self, name: str, arguments: str, call_id: str | None = None, response_id: str | None = None
    ) -> list[Out]:
        """A complete tool call of the reply (the streaming form: ``function_call_start``,
        ``function_call_delta``, ``function_call_end``)."""
        out = self.function_call_start(name, call_id, response_id)
        out += self.function_call_delta(arguments, response_id)
        return out + self.function_call_end(response_id)

    def function_call_start(
        self, name: str, call_id: str | None = None, response_id: str | None = None
    ) -> list[Out]:
        r = self._open(response_id)
        if r is None:
            return []
        out: list[Out] = [*r.close_item("completed")]
        item = FunctionCallItem(
            name=name,
            arguments="",
            call_id=call_id or self.ids.new("call"),
            id=self.ids.new("item"),
            status="in_progress",
        )
        return out + r.start_item(item)

    def function_call_delta(self, delta: str, response_id: str | None = None) -> list[Out]:
        r = self._open(response_id)
        return list(r.arguments(delta)) if r is not None and delta else []

    def function_call_end(self, response_id: str | None = None) -> list[Out]:
        r = self._open(response_id)
        return list(r.close_item("completed")) if r is not None else []

    def note_usage(self, usage: S.Usage, response_id: str | None = None) -> None:
        """Token counts so far of the response in progress (reported in ``response.done``)."""
        r = self._open(response_id)
        if r is not None:
            r.usage = usage

    def response_finished(
        self,
        *,
        incomplete_reason: str | None = None,
        usage: S.Usage | None = None,
        response_id: str | None = None,
    ) -> list[Out]:
        """The reply is complete (``incomplete_reason="max_output_tokens"``: it was cut
        at the token budget)."""
        r = self._open(response_id)
        if r is None:
            return []
        if usage is not None:
            r.usage = usage
        status = "incomplete" if incomplete_reason else "completed"
        return self._finish(status, incomplete_reason)

    def response_failed(self, message: str, response_id: str | None = None) -> list[Out]:
        r = self._open(response_id)
        if r is None:
            return []
        err = RealtimeError("pipeline_error", message, type="server_error")
        return self._finish("failed", None, error=err)
