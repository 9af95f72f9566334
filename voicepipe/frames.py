"""Typed frames that flow between pipeline stages.

Every frame carries ``turn_id`` (which user turn it belongs to; 0 before the
first turn) and ``t_ns`` (creation time on the shared clock). System frames
jump the queue in every stage (see ``voicepipe.stage``); data frames keep their
order. No dict payloads: each kind of payload is its own class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voicepipe.clock import now_ns


@dataclass(kw_only=True)
class Frame:
    turn_id: int = 0
    t_ns: int = field(default_factory=now_ns)

    @property
    def is_system(self) -> bool:
        return isinstance(self, SystemFrame)


@dataclass(kw_only=True)
class SystemFrame(Frame):
    """Handled before any queued data frame."""


# ---------------------------------------------------------------- system frames


@dataclass(kw_only=True)
class Interrupt(SystemFrame):
    """The user barged in: drop every in-flight piece of work for turns < turn_id."""

    reason: str = "barge-in"


@dataclass(kw_only=True)
class Cancel(SystemFrame):
    """Cancel the work of exactly this turn (e.g. a preemptive reply that lost)."""

    reason: str = ""


@dataclass(kw_only=True)
class End(SystemFrame):
    """The session is over; stages flush and stop."""


@dataclass(kw_only=True)
class SpanFrame(SystemFrame):
    """A finished latency span (names in docs/DESIGN.md §9), travelling to the sink."""

    name: str
    start_ns: int
    end_ns: int
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(kw_only=True)
class MetricsFrame(SystemFrame):
    """Counters a stage wants the client / trace to see (acceptance, underruns…)."""

    source: str
    values: dict[str, float | int]


@dataclass(kw_only=True)
class ErrorFrame(SystemFrame):
    """A stage failed; the session ends with this code and message."""

    code: str
    message: str
    fatal: bool = True


@dataclass(kw_only=True)
class PlaybackReport(SystemFrame):
    """The client played ``played_samples`` samples of reply ``reply_turn`` by ``t_ns``.

    Flows upstream so the LLM can keep only what the user actually heard.
    """

    reply_turn: int
    played_samples: int
    sample_rate: int
    first_play_ns: int | None = None
    done: bool = False


@dataclass(kw_only=True)
class ReplyHeard(SystemFrame):
    """Reply ``turn_id`` was cut off; the user heard only ``text`` of it.

    Sent upstream by the TTS (which knows how much audio each chunk became)
    when a playback report shows an interrupted reply, so the LLM's context
    keeps only what was actually played.
    """

    text: str


@dataclass(kw_only=True)
class ReplyWords(SystemFrame):
    """Text the LLM sent to the TTS for reply ``turn_id``.

    Sent upstream by the LLM to the barge-in stage: the words of the reply in flight are
    its reference for telling the assistant's own echo from the user (core/turns/overlap.py).
    """

    text: str


@dataclass(kw_only=True)
class PlayoutHold(SystemFrame):
    """Pause (``hold``) or resume the reply being sent.

    Sent downstream by the barge-in stage when speech begins over a reply and while its
    words are judged: the output stage stops sending reply audio at once (the client
    plays out what it holds, then runs dry) and resumes where it stopped on ``hold=False``;
    an ``Interrupt`` instead cuts the reply.
    """

    hold: bool


# ---------------------------------------------------------------- data frames


@dataclass(kw_only=True)
class AudioIn(Frame):
    """Mono float32 PCM from the user at ``sample_rate``; ``media_ns`` is its stream time."""

    pcm: np.ndarray  # (N,) float32 in [-1, 1]
    sample_rate: int
    media_ns: int = 0
    seq: int = 0


@dataclass(kw_only=True)
class SpeechStart(Frame):
    """VAD saw speech begin at media time ``media_ns``."""

    media_ns: int


@dataclass(kw_only=True)
class SpeechEnd(Frame):
    """Endpoint: the user stopped speaking at media time ``media_ns`` (last speech frame).
    ``accepted`` False: too short to be a turn (a click, a cough), or cleared: no final follows."""

    media_ns: int
    accepted: bool = True


@dataclass(kw_only=True)
class TranscriptPartial(Frame):
    """A partial transcript of the open turn (core/turns/partials.py): ``text`` to show
    (committed words + the newest decode's tail), ``stable_prefix`` the committed words as
    the newest decode spells them, ``heard`` that decode's own text (what the LLM's
    streaming prefill feeds: the final most likely repeats its spelling)."""

    text: str
    stable_prefix: str = ""
    heard: str = ""
    level_db: float | None = None  # the turn's speech level so far (core/turns/level.py)


@dataclass(kw_only=True)
class TranscriptStable(Frame):
    """Speech paused in ``turn_id`` long enough (``turns.preempt_after_ms``) that ``text``
    is probably the final transcript: the LLM may start a tentative reply on it.

    Sent by the ASR during the endpoint silence. Nothing of that reply reaches the
    client until a ``TranscriptFinal`` that agrees (core/turns/preempt.py) confirms it.
    """

    text: str
    speech_end_media_ns: int = 0


@dataclass(kw_only=True)
class SpeechResumed(Frame):
    """The user spoke again in ``turn_id`` after a ``TranscriptStable``: that text is void."""


@dataclass(kw_only=True)
class TranscriptFinal(Frame):
    text: str
    speech_end_media_ns: int = 0
    speech_end_wall_ns: int = 0
    level_db: float | None = None  # the turn's speech level (core/turns/level.py)


@dataclass(kw_only=True)
class TextDelta(Frame):
    """Reply text as the LLM produces it."""

    text: str


@dataclass(kw_only=True)
class TextChunk(Frame):
    """A speakable clause handed from the LLM to the TTS; ``last`` ends the reply."""

    text: str
    last: bool = False


@dataclass(kw_only=True)
class Alert(Frame):
    """Something the assistant announces unasked, e.g. a timer that ended (``kind``
    "timer"). The LLM stage speaks ``text`` right after it; the server sends the
    ``alert`` message (docs/PROTOCOL.md)."""

    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class ReplyAudio(Frame):
    """Reply speech, mono float32 at ``sample_rate``."""

    pcm: np.ndarray  # (N,) float32
    sample_rate: int
    # On the first piece of each text chunk's audio: the chunk's text (the output stage
    # times its words for echo gating, core/playout/speaker.py); "" on the other pieces.
    text: str = ""


@dataclass(kw_only=True)
class ReplyEnd(Frame):
    """No more reply text/audio for this turn."""

    text: str = ""


@dataclass(kw_only=True)
class InputEnd(Frame):
    """In-order marker: the client sent its last audio (protocol message ``end``).

    Unlike the system frame ``End`` (stop now), this queues behind the data
    before it: a stage finishes (flushes) what it holds, then pushes it on.
    When it reaches the sink every reply has been sent and the server says
    ``done``.
    """


# ---------------------------------------------------------------- endpoint control
# What an endpoint other than protocol v1 asks of the pipeline (the Realtime API's
# session.update, input_audio_buffer.commit, conversation items, response.create:
# server/realtime.py). Data frames, so they keep their order with the audio; each stage
# acts on its part and pushes the frame on.


@dataclass(kw_only=True)
class SessionSetup(Frame):
    """Session settings; None keeps the current value."""

    vad: dict[str, float | int] | None = None  # [vad] overrides for the ASR's endpointer
    # [turns] eagerness for the ASR's endpointer (off: silence only; the Realtime API's
    # server_vad is off, its semantic_vad names one)
    eagerness: str | None = None
    barge_in: bool | None = None  # speech start interrupts the reply in progress (BargeIn)
    auto_reply: bool | None = None  # a final transcript starts a reply (LLM); else Respond
    system_prompt: str | None = None  # the LLM's instructions
    client_tools: list[dict[str, Any]] | None = None  # chat-template specs the client runs
    max_new_tokens: int | None = None  # per reply (0: the configured llm.max_new_tokens)


@dataclass(kw_only=True)
class TurnControl(Frame):
    """``commit``: end the open user turn now (its final follows); ``clear``: drop it.
    Pushed on after acting, so the endpoint sees where it fell among the turns."""

    action: str
    key: str = ""  # the endpoint's name for this commit


@dataclass(kw_only=True)
class ContextEdit(Frame):
    """Add ``message`` (a chat message dict) to the end of the LLM's conversation under
    ``key``, or, with ``message`` None, remove the one added under ``key``."""

    key: str
    message: dict[str, Any] | None = None


@dataclass(kw_only=True)
class Respond(Frame):
    """Reply now to the conversation as it stands (no new user words), as turn ``turn_id``.
    Non-None fields override the session's for this reply only."""

    instructions: str | None = None
    client_tools: list[dict[str, Any]] | None = None
    max_new_tokens: int | None = None


@dataclass(kw_only=True)
class ToolCallOut(Frame):
    """The model called a tool the client runs (``SessionSetup.client_tools``): the reply
    ends with it; the client sends the result back as a ``tool`` message and a Respond."""

    name: str
    arguments: str  # JSON object text
