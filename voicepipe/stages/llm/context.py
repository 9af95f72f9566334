"""The LLM stage's conversation under an endpoint's control (the Realtime API's, see
server/realtime.py): session settings, items added and removed, replies on request,
tools the client runs.

Not a stage (stages never import each other): the part of ``LlmStage`` that acts on
``SessionSetup``, ``ContextEdit`` and ``Respond`` frames (voicepipe/frames.py). Over
``/ws`` none of them arrives and the stage runs as it always did: a final transcript
starts a reply.

- ``auto_reply`` off: a final transcript starts nothing and is not remembered; the
  endpoint adds the user's words as a ``ContextEdit`` once it has made them an item, and
  asks for the reply with ``Respond``.
- Client tools: their specs join the chat template's ``tools`` with the built-in ones;
  a call to one ends the reply with a ``ToolCallOut`` (the client runs it and sends its
  output back as a ``tool`` message), while built-in calls still run here.
- ``ContextEdit`` messages go to the end of the conversation in arrival order; removing
  one removes exactly that message (by identity), wherever older turns went meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from voicepipe.frames import ContextEdit, Respond, SessionSetup

_MAX_EDITS = 4096  # keys remembered for removal (the conversation itself is bounded by length)


class EndpointContext:
    """Mixin for ``LlmStage``: the state an endpoint sets and the edits it makes."""

    messages: list[dict[str, Any]]
    max_new_tokens: int
    _specs: list[dict[str, Any]] | None
    _builtin_specs: list[dict[str, Any]]

    def _init_context(self, max_new_tokens: int) -> None:
        self.auto_reply = True
        self.default_max_new_tokens = max_new_tokens
        self.max_new_tokens = max_new_tokens
        self._client_specs: list[dict[str, Any]] = []
        self._edits: dict[str, dict[str, Any]] = {}

    @property
    def client_tool_names(self) -> frozenset[str]:
        return frozenset(s["function"]["name"] for s in self._client_specs)

    def _merge_specs(self) -> None:
        """Built-in tools and the client's (a client tool shadows a built-in of its name)."""
        names = self.client_tool_names
        specs = [s for s in self._builtin_specs if s["function"]["name"] not in names]
        tok = getattr(getattr(self, "engine", None), "tokenizer", None)
        if getattr(tok, "supports_tools", False):  # (else the template could not show them)
            specs += self._client_specs
        self._specs = specs or None

    def _set_system(self, text: str) -> None:
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

    def configure(self, frame: SessionSetup) -> None:
        if frame.auto_reply is not None:
            self.auto_reply = frame.auto_reply
        if frame.system_prompt is not None:
            self._set_system(frame.system_prompt)
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
                self._set_system(frame.instructions)
            if frame.client_tools is not None:
                self._client_specs = list(frame.client_tools)
                self._merge_specs()
            if frame.max_new_tokens is not None:
                self.max_new_tokens = frame.max_new_tokens or self.default_max_new_tokens
            yield
        finally:
            if frame.instructions is not None:
                self._set_system(saved[0])
            if frame.client_tools is not None:
                self._client_specs = saved[1]
                self._merge_specs()
            self.max_new_tokens = saved[2]
