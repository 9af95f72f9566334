"""The LLM stage's conversation, under an endpoint's control where one is in charge (the
Realtime API's, see server/realtime.py): the messages, session settings, items added and
removed, replies on request, tools the client runs.

Not a stage: the ``Conversation`` an ``LlmStage`` holds. It acts on ``SessionSetup``,
``ContextEdit`` and ``Respond`` frames (voicepipe/frames.py); over ``/ws`` none of them
arrives and the stage runs as it always did: a final transcript starts a reply.

- ``auto_reply`` off: a final transcript starts nothing and is not remembered; the
  endpoint adds the user's words as a ``ContextEdit`` once it has made them an item, and
  asks for the reply with ``Respond``.
- Client tools: their specs join the chat template's ``tools`` with the built-in ones;
  a call to one ends the reply with a ``ToolCallOut`` (the client runs it and sends its
  output back as a ``tool`` message), while built-in calls still run here.
- ``ContextEdit`` messages go to the end of the conversation in arrival order; removing
  one removes exactly that message (by identity), wherever older turns went meanwhile.

The conversation holds committed turns only; a reply is found again by its turn
(``set_heard``), by identity, so dropping old turns shifts nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from voicepipe.frames import ContextEdit, Respond, SessionSetup
from voicepipe.stages.llm.reply import Reply

_MAX_EDITS = 4096  # keys remembered for removal (the conversation itself is bounded by length)
_KEEP_REPLIES = 16  # turns whose reply set_heard can still find

Message = dict[str, Any]


class Conversation:
    """The messages of one session and the settings an endpoint may change."""

    def __init__(self, system_prompt: str, max_new_tokens: int) -> None:
        self.messages: list[Message] = []
        if system_prompt:
            self.messages.append({"role": "system", "content": system_prompt})
        self.auto_reply = True
        self.default_max_new_tokens = max_new_tokens
        self.max_new_tokens = max_new_tokens
        self.specs: list[Message] | None = None  # the tools the chat template renders
        self._builtin_specs: list[Message] = []
        self._renders_tools = False  # the tokenizer's template shows a tools block
        self._client_specs: list[Message] = []
        self._edits: dict[str, Message] = {}
        self._reply_of: dict[int, Message] = {}  # turn → its assistant message

    # ------------------------------------------------------------ tools and system prompt

    def set_tools(self, builtin_specs: list[Message], renders_tools: bool) -> None:
        """The session's built-in tools and whether the chat template can show tools."""
        self._builtin_specs = builtin_specs
        self._renders_tools = renders_tools
        self._merge_specs()

    @property
    def client_tool_names(self) -> frozenset[str]:
        return frozenset(s["function"]["name"] for s in self._client_specs)

    def _merge_specs(self) -> None:
        """Built-in tools and the client's (a client tool shadows a built-in of its name)."""
        names = self.client_tool_names
        specs = [s for s in self._builtin_specs if s["function"]["name"] not in names]
        if self._renders_tools:  # (else the template could not show them)
            specs += self._client_specs
        self.specs = specs or None

    def set_system(self, text: str) -> None:
        if self.messages and self.messages[0]["role"] == "system":
            if text:
                self.messages[0]["content"] = text
            else:
                del self.messages[0]
        elif text:
            self.messages.insert(0, {"role": "system", "content": text})

    def system_text(self) -> str:
        """The system prompt in force (empty: none)."""
        has = bool(self.messages) and self.messages[0]["role"] == "system"
        return str(self.messages[0]["content"]) if has else ""

    # ------------------------------------------------------------ endpoint control

    def configure(self, frame: SessionSetup) -> None:
        if frame.auto_reply is not None:
            self.auto_reply = frame.auto_reply
        if frame.system_prompt is not None:
            self.set_system(frame.system_prompt)
        if frame.client_tools is not None:
            self._client_specs = list(frame.client_tools)
            self._merge_specs()
        if frame.max_new_tokens is not None:
            self.max_new_tokens = frame.max_new_tokens or self.default_max_new_tokens

    def edit(self, frame: ContextEdit) -> None:
        if frame.message is not None:
            msg = dict(frame.message)
            self.messages.append(msg)
            self._edits[frame.key] = msg
            while len(self._edits) > _MAX_EDITS:
                del self._edits[next(iter(self._edits))]
            return
        gone = self._edits.pop(frame.key, None)
        if gone is not None:
            self.messages[:] = [m for m in self.messages if m is not gone]

    @contextmanager
    def overrides(self, frame: Respond) -> Iterator[None]:
        """A response's own instructions, tools and token budget, for that reply only."""
        saved = (self.system_text(), self._client_specs, self.max_new_tokens)
        try:
            if frame.instructions is not None:
                self.set_system(frame.instructions)
            if frame.client_tools is not None:
                self._client_specs = list(frame.client_tools)
                self._merge_specs()
            if frame.max_new_tokens is not None:
                self.max_new_tokens = frame.max_new_tokens or self.default_max_new_tokens
            yield
        finally:
            if frame.instructions is not None:
                self.set_system(saved[0])
            if frame.client_tools is not None:
                self._client_specs = saved[1]
                self._merge_specs()
            self.max_new_tokens = saved[2]

    # ------------------------------------------------------------ memory

    def set_heard(self, turn: int, text: str) -> bool:
        """Replace a cut-off reply with what the user actually heard (see core/turns/heard.py).

        Returns False when the turn's reply is no longer in the conversation.
        """
        msg = self._reply_of.get(turn)  # (a tool round's messages stay as they were)
        if msg is None or not any(m is msg for m in self.messages):
            return False
        msg["content"] = text
        return True

    def remember(self, r: Reply) -> None:
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

    def _first_turn(self) -> int:
        return 1 if self.messages and self.messages[0]["role"] == "system" else 0

    def with_user(self, user_text: str, extra: list[Message] | None = None) -> list[Message]:
        """The messages of a prompt: the conversation, ``user_text`` (none when empty: a
        reply on an endpoint's request) and ``extra`` (a reply's tool round so far)."""
        user = [{"role": "user", "content": user_text}] if user_text else []
        return [*self.messages, *user, *(extra or [])]

    def fit(
        self,
        render: Callable[[list[Message]], list[int]],
        budget: int,
        user_text: str,
        extra: list[Message] | None = None,
    ) -> list[int]:
        """The prompt's token ids (``render``: the chat template), forgetting the oldest
        turns while it is longer than ``budget`` tokens."""
        first_turn = self._first_turn()
        while True:
            ids = render(self.with_user(user_text, extra))
            if len(ids) <= budget or len(self.messages) <= first_turn:
                return ids[-budget:]
            # Forget the oldest turn: its question and its answer together, so the history
            # never starts with an answer to a question it no longer holds.
            del self.messages[first_turn]
            while len(self.messages) > first_turn and self.messages[first_turn]["role"] != "user":
                del self.messages[first_turn]

    def forget_oldest_turn(self) -> bool:
        """Drop the oldest question with its answer (never the system prompt)."""
        first = self._first_turn()
        users = [i for i, m in enumerate(self.messages) if i >= first and m["role"] == "user"]
        if not users:
            return False
        del self.messages[first : users[1] if len(users) > 1 else len(self.messages)]
        return True
