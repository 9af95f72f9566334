"""What a ``RealtimeSession`` asks of the pipeline: plain data, executed in order by the shell
(the server's ``/v1/realtime`` handler) between the server events it sends. Sans-I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from voicepipe.core.realtime import server_events as S
from voicepipe.core.realtime.events import FunctionTool, Item, MaxTokens, ToolChoice


@dataclass(frozen=True)
class Configure:
    """The session's effective configuration changed: instructions (the LLM's system
    prompt), VAD knobs (``config.vad_overrides()``), tools, max_output_tokens, voice."""

    config: S.SessionConfig


@dataclass(frozen=True)
class AppendAudio:
    pcm: bytes  # PCM16 LE mono, 24 kHz: resample and feed to the VAD / ASR


@dataclass(frozen=True)
class CommitAudio:
    """End the user's turn now (the endpointer's ``flush``): its transcript is item_id's."""

    item_id: str


@dataclass(frozen=True)
class ClearAudio:
    """Drop the uncommitted input (the open turn's audio, not yet a user item)."""


@dataclass(frozen=True)
class AddItem:
    """Put an item into the LLM's conversation, after ``previous_item_id`` (None: at the end,
    "root": at the start)."""

    item: Item
    previous_item_id: str | None


@dataclass(frozen=True)
class DeleteItem:
    item_id: str


@dataclass(frozen=True)
class StartResponse:
    """Generate a reply to the conversation so far (for VAD turns: once item_id's transcript
    is final)."""

    response_id: str
    instructions: str
    output_modalities: tuple[str, ...]
    max_output_tokens: MaxTokens
    tools: tuple[FunctionTool, ...]
    tool_choice: ToolChoice
    after_item_id: str | None  # the user item this response answers, if any


@dataclass(frozen=True)
class CancelResponse:
    response_id: str
    reason: str  # turn_detected | client_cancelled


@dataclass(frozen=True)
class SetHeard:
    """The user heard only ``text`` of the assistant item (LLM stage ``set_heard``)."""

    item_id: str
    response_id: str
    text: str
    audio_end_ms: int


Action = (
    Configure
    | AppendAudio
    | CommitAudio
    | ClearAudio
    | AddItem
    | DeleteItem
    | StartResponse
    | CancelResponse
    | SetHeard
)
Out = S.ServerEvent | Action  # what every session method returns, in order
