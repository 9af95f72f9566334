"""Bookkeeping behind ``RealtimeSession``: the conversation's items and the response being
generated (its output items, their content parts, and how much audio carried which
words, for heard-trimming on ``conversation.item.truncate``). Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from voicepipe.core.realtime import server_events as S
from voicepipe.core.realtime.events import (
    BYTES_PER_MS,
    ContentPart,
    FunctionCallItem,
    Item,
    MaxTokens,
    MessageItem,
    RealtimeError,
)
from voicepipe.core.turns.heard import SpokenReply

MAX_ITEMS = 4096  # a conversation longer than this forgets its oldest items (the LLM has long)
KEEP_SPOKEN = 16  # assistant items whose audio a truncate can still refer to


@dataclass
class Spoken:
    """The audio of one assistant item: how many bytes, and which text each stretch said."""

    response_id: str
    audio_bytes: int = 0
    transcript: str = ""
    chunks: list[tuple[str, int]] = field(default_factory=list)  # (text, audio bytes)
    attributed: bool = False  # the pipeline said which text each stretch of audio is

    def add_audio(self, nbytes: int, spoken_text: str | None) -> None:
        self.audio_bytes += nbytes
        if spoken_text is not None:
            self.attributed = True
            self.chunks.append((spoken_text, nbytes))
        elif self.chunks:
            text, n = self.chunks[-1]
            self.chunks[-1] = (text, n + nbytes)
        else:
            self.chunks.append(("", nbytes))

    @property
    def ms(self) -> int:
        return self.audio_bytes // BYTES_PER_MS

    def heard(self, audio_end_ms: int) -> str:
        """The words whose audio ended within the first ``audio_end_ms`` (core/turns/heard.py)."""
        if audio_end_ms >= self.ms:
            return self.transcript.strip()
        per_s = BYTES_PER_MS * 1000
        if self.attributed:
            reply = SpokenReply([(t, n / per_s) for t, n in self.chunks])
        else:  # only the whole transcript is known: its words spread evenly over the audio
            reply = SpokenReply([(self.transcript, self.audio_bytes / per_s)])
        return reply.heard(audio_end_ms / 1000.0)

    def truncate(self, audio_end_ms: int, text: str) -> None:
        self.audio_bytes = min(self.audio_bytes, audio_end_ms * BYTES_PER_MS)
        self.transcript = text
        self.chunks = [(text, self.audio_bytes)]
        self.attributed = False


def item_added_events(
    eid: Callable[[], str], item: Item, prev: str | None, *, legacy: bool, done: bool
) -> list[S.ServerEvent]:
    out: list[S.ServerEvent] = [S.ItemAdded(event_id=eid(), item=item, previous_item_id=prev)]
    if legacy:
        out.append(S.ItemCreated(event_id=eid(), item=item, previous_item_id=prev))
    if done:
        out.append(S.ItemDone(event_id=eid(), item=item, previous_item_id=prev))
    return out


class Conversation:
    """Items in order. ``previous_item_id``: None appends, "root" inserts first."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.items: dict[str, Item] = {}
        self.spoken: dict[str, Spoken] = {}

    def has(self, item_id: str) -> bool:
        return item_id in self.items

    def get(
        self, item_id: str, code: str = "item_retrieve_invalid_item_id", verb: str = "retrieving"
    ) -> Item:
        item = self.items.get(item_id)
        if item is None:
            raise RealtimeError(
                code,
                f"Error {verb} item: the item with id '{item_id[:64]}' does not exist.",
                param="item_id",
            )
        return item

    def last_id(self) -> str | None:
        return self.order[-1] if self.order else None

    def prev_of(self, item_id: str) -> str | None:
        i = self.order.index(item_id) if item_id in self.items else 0
        return self.order[i - 1] if i > 0 else None

    def add(self, item: Item, previous_item_id: str | None) -> str | None:
        """Insert; returns the id of the item it now follows."""
        assert item.id is not None
        if previous_item_id is None:
            at = len(self.order)
        elif previous_item_id == "root":
            at = 0
        elif previous_item_id in self.items:
            at = self.order.index(previous_item_id) + 1
        else:
            raise RealtimeError(
                "invalid_item_id",
                f"previous_item_id '{previous_item_id[:64]}' does not exist.",
                param="previous_item_id",
            )
        self.order.insert(at, item.id)
        self.items[item.id] = item
        while len(self.order) > MAX_ITEMS:
            self._drop(self.order[0])
        return self.order[at - 1] if at > 0 else None

    def put(self, item: Item) -> None:
        """Replace an item in place (no-op if it was deleted meanwhile)."""
        if item.id is not None and item.id in self.items:
            self.items[item.id] = item

    def delete(self, item_id: str) -> None:
        self.get(item_id, "item_delete_invalid_item_id", "deleting")
        self._drop(item_id)

    def _drop(self, item_id: str) -> None:
        self.order.remove(item_id)
        del self.items[item_id]
        self.spoken.pop(item_id, None)

    def set_transcript(self, item_id: str, text: str) -> None:
        """The words of an audio message: the ASR's for a user item, the heard ones for an
        assistant item that was cut."""
        item = self.items.get(item_id)
        if not isinstance(item, MessageItem):
            return
        parts = tuple(
            replace(c, transcript=text)
            if c.type in ("input_audio", "output_audio")
            else replace(c, text=text)
            if c.type == "output_text"
            else c
            for c in item.content
        )
        self.put(replace(item, content=parts))

    def remember_spoken(self, item_id: str, spoken: Spoken) -> None:
        self.spoken[item_id] = spoken
        while len(self.spoken) > KEEP_SPOKEN:
            del self.spoken[next(iter(self.spoken))]


@dataclass
class OpenResponse:
    """The response in progress: its finished output items and the one being generated."""

    id: str
    conversation_id: str
    modalities: tuple[str, ...]
    max_output_tokens: MaxTokens
    voice: str
    metadata: tuple[tuple[str, str], ...] | None
    eid: Callable[[], str]
    new_id: Callable[[str], str]
    conv: Conversation
    legacy_created: bool
    output: list[Item] = field(default_factory=list)
    usage: S.Usage | None = None
    cur: Item | None = None  # the output item being generated
    parts: list[str] = field(default_factory=list)  # its text deltas / argument deltas
    spoken: Spoken | None = None

    @property
    def audio_mode(self) -> bool:
        return "audio" in self.modalities

    def owns(self, item_id: str) -> bool:
        return any(i.id == item_id for i in self.output) or (
            self.cur is not None and self.cur.id == item_id
        )

    def resource(
        self, status: str, reason: str | None = None, error: RealtimeError | None = None
    ) -> S.ResponseResource:
        return S.ResponseResource(
            id=self.id,
            status=status,
            conversation_id=self.conversation_id,
            output=tuple(self.output),
            output_modalities=self.modalities,
            max_output_tokens=self.max_output_tokens,
            voice=self.voice,
            reason=reason,
            error=error,
            usage=(self.usage or S.Usage()) if status != "in_progress" else None,
            metadata=self.metadata,
        )

    def start_item(self, item: Item) -> list[S.ServerEvent]:
        assert item.id is not None
        prev = self.conv.add(item, None)
        self.cur = item
        self.parts = []
        out: list[S.ServerEvent] = [
            S.OutputItemAdded(
                event_id=self.eid(), response_id=self.id, output_index=len(self.output), item=item
            )
        ]
        return out + item_added_events(self.eid, item, prev, legacy=self.legacy_created, done=False)

    def _message(self) -> list[S.ServerEvent]:
        """Open an assistant message (and its one content part) unless one is open."""
        if isinstance(self.cur, MessageItem):
            return []
        out = self.close_item("completed")
        item = MessageItem(
            role="assistant", content=(), id=self.new_id("item"), status="in_progress"
        )
        out += self.start_item(item)
        assert item.id is not None
        self.spoken = Spoken(response_id=self.id)
        if self.audio_mode:  # only audio messages can be truncated
            self.conv.remember_spoken(item.id, self.spoken)
        part = S.Part(type="audio" if self.audio_mode else "text")
        out.append(
            S.ContentPartAdded(
                event_id=self.eid(),
                response_id=self.id,
                item_id=item.id,
                output_index=len(self.output),
                part=part,
            )
        )
        return out

    def text(self, delta: str) -> list[S.ServerEvent]:
        out = self._message()
        assert self.cur is not None and self.cur.id is not None and self.spoken is not None
        self.parts.append(delta)
        self.spoken.transcript += delta
        cls = S.OutputTranscriptDelta if self.audio_mode else S.OutputTextDelta
        out.append(
            cls(
                event_id=self.eid(),
                response_id=self.id,
                item_id=self.cur.id,
                output_index=len(self.output),
                delta=delta,
            )
        )
        return out

    def audio(self, pcm: bytes, spoken_text: str | None) -> list[S.ServerEvent]:
        out = self._message()
        assert self.cur is not None and self.cur.id is not None and self.spoken is not None
        self.spoken.add_audio(len(pcm), spoken_text)
        out.append(
            S.OutputAudioDelta(
                event_id=self.eid(),
                response_id=self.id,
                item_id=self.cur.id,
                output_index=len(self.output),
                delta=pcm,
            )
        )
        return out

    def arguments(self, delta: str) -> list[S.ServerEvent]:
        cur = self.cur
        if not isinstance(cur, FunctionCallItem) or cur.id is None or cur.call_id is None:
            return []
        self.parts.append(delta)
        return [
            S.FunctionArgumentsDelta(
                event_id=self.eid(),
                response_id=self.id,
                item_id=cur.id,
                output_index=len(self.output),
                call_id=cur.call_id,
                delta=delta,
            )
        ]

    def close_item(self, status: str) -> list[S.ServerEvent]:
        """Finish the open output item (``incomplete`` when the response was cut)."""
        cur = self.cur
        if cur is None or cur.id is None:
            return []
        rid, iid, index = self.id, cur.id, len(self.output)
        text = "".join(self.parts)
        out: list[S.ServerEvent] = []
        final: Item
        if isinstance(cur, MessageItem):
            if self.audio_mode:
                out += [
                    S.OutputAudioDone(
                        event_id=self.eid(), response_id=rid, item_id=iid, output_index=index
                    ),
                    S.OutputTranscriptDone(
                        event_id=self.eid(),
                        response_id=rid,
                        item_id=iid,
                        output_index=index,
                        transcript=text,
                    ),
                ]
                part = ContentPart(type="output_audio", transcript=text)
            else:
                out.append(
                    S.OutputTextDone(
                        event_id=self.eid(),
                        response_id=rid,
                        item_id=iid,
                        output_index=index,
                        text=text,
                    )
                )
                part = ContentPart(type="output_text", text=text)
            out.append(
                S.ContentPartDone(
                    event_id=self.eid(),
                    response_id=rid,
                    item_id=iid,
                    output_index=index,
                    part=S.Part(type="audio" if self.audio_mode else "text", text=text),
                )
            )
            final = replace(cur, content=(part,), status=status)
        else:
            assert isinstance(cur, FunctionCallItem) and cur.call_id is not None
            if status == "completed":
                out.append(
                    S.FunctionArgumentsDone(
                        event_id=self.eid(),
                        response_id=rid,
                        item_id=iid,
                        output_index=index,
                        call_id=cur.call_id,
                        name=cur.name,
                        arguments=text,
                    )
                )
            final = replace(cur, arguments=text, status=status)
        self.conv.put(final)
        self.output.append(final)
        self.cur = None
        self.parts = []
        out.append(
            S.OutputItemDone(
                event_id=self.eid(), response_id=self.id, output_index=index, item=final
            )
        )
        out.append(
            S.ItemDone(event_id=self.eid(), item=final, previous_item_id=self.conv.prev_of(cur.id))
        )
        return out
