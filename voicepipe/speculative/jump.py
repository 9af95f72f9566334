"""Jump-forward proposals: the fixed text of a tool call (core/jump.py) as the model's tokens.

``JumpProposer.propose(context, k)`` finds the reply in ``context`` (the tokens after
the last assistant header), asks the call grammar what text is fixed next, and turns it
into token ids. A proposal is ``certain``: the decoder feeds it with the last emitted
token in one pass and reads only that pass's last row (the next real choice), without
verifying it (``SpeculativeDecoder.forcer``); or, with ``verify``, it is an ordinary
draft the target checks.

Token boundaries: forced text must be the tokens the model would write. The text is
encoded together with the last emitted token's own text (which must encode back to that
token, else nothing is forced: the model split it its own way), and cut back to the
tokens that stay the same whatever follows (the grammar's samples of what may come
next: ``": "`` before a string value stays ``":`` + `` "`` only if no value merges with
the quote; ``_current_time"`` loses its quote, which the model writes merged as
``"}}``). A forced end of turn appends the template's end token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from voicepipe.core.jump import CallGrammar
from voicepipe.speculative import skeleton
from voicepipe.speculative.skeleton import turn_tokens
from voicepipe.speculative.types import Proposal

_MAX_REPLY = 512  # tokens of a reply looked at (a call is far shorter)


class Tokenizer(skeleton.Tokenizer, Protocol):
    """What forcing needs of ``voicepipe.nn.llm.tokenizer.ChatTokenizer``."""

    def decode(self, ids: list[int], skip_special: bool = True) -> str: ...


class JumpProposer:
    """Proposes a tool call's fixed tokens (``certain``: accept without verifying)."""

    name = "jump"

    def __init__(self, tok: Tokenizer, grammar: CallGrammar, certain: bool = True) -> None:
        self.tok = tok
        self.grammar = grammar
        self.certain = certain
        self.header, end = turn_tokens(tok)
        self.end = end[:1]
        if not self.header:
            raise ValueError("the chat template's assistant header was not found")
        self._enc: dict[str, list[int]] = {}

    def reset(self) -> None:
        pass  # stateless: everything is read off the context

    def propose(self, context: list[int], k: int) -> Proposal:
        if k <= 0:
            return Proposal(tokens=[])
        start = _reply_start(context, self.header, _MAX_REPLY)
        if start is None or start >= len(context):
            return Proposal(tokens=[])
        reply = context[start:]
        text = self.tok.decode(reply, skip_special=False)
        if "{" not in text:
            return Proposal(tokens=[])
        j = self.grammar.next(text)
        if j is None or (not j.text and not j.end):
            return Proposal(tokens=[])
        ids = self.encode_after(reply[-1], j.text, j.follow) if j.text else []
        if ids is None:
            return Proposal(tokens=[])
        if j.end:  # (nothing follows the text: it was not cut)
            ids = [*ids, *self.end]
        if not ids:
            return Proposal(tokens=[])
        return Proposal(tokens=ids[:k], certain=self.certain)

    def _encode(self, text: str) -> list[int]:
        got = self._enc.get(text)
        if got is None:
            if len(self._enc) > 4096:
                self._enc.clear()
            got = self._enc[text] = self.tok.encode(text, add_bos=False)
        return got

    def encode_after(self, last: int, text: str, follow: Sequence[str]) -> list[int] | None:
        """``text``'s tokens as the model writes them after token ``last`` (None: ``last``
        does not encode back to itself), cut where any of ``follow`` would merge."""
        try:
            tail = self.tok.token_bytes(last).decode("utf-8")
        except UnicodeDecodeError:
            return None
        if self._encode(tail) != [last]:
            return None
        full = self._encode(tail + text)
        if full[:1] != [last]:
            return None
        ids = full[1:]
        keep = len(ids)
        for f in follow:
            more = self._encode(tail + text + f)[1:]
            n = 0
            while n < keep and n < len(more) and more[n] == ids[n]:
                n += 1
            keep = n
        return ids[:keep]


def _reply_start(context: Sequence[int], header: Sequence[int], window: int) -> int | None:
    """Index just past the last assistant header within the context's last ``window``
    tokens, or None."""
    h = len(header)
    lo = max(0, len(context) - window - h)
    for i in range(len(context) - h, lo - 1, -1):
        if context[i] == header[0] and list(context[i : i + h]) == list(header):
            return i + h
    return None


def build(
    tok: Tokenizer, specs: Sequence[Mapping[str, Any]], certain: bool = True
) -> JumpProposer | None:
    """A proposer over ``specs`` (the chat template's tool entries); None when there are
    none or they cannot be forced."""
    if not specs:
        return None
    return JumpProposer(tok, CallGrammar(specs), certain)
