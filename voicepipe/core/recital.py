"""A reply that recites its tools instead of answering, sans-I/O: caught before it is said.

Why: asked "What should I do?" after a mishap, Qwen2.5-Coder-1.5B with tools on sometimes
answers as if it were asked what *it* should do, reciting its instructions: "Call
getcurrenttime to determine the time. If the gas smell is strong, call settimer for 15
minutes…" (`bench answers --served`, development set: hot coffee spilled, gas smelled;
answers set: a burned finger, feeling faint, a thunderstorm). With tools hidden the same
model answers these from what it knows.

``RecitalGuard`` sits between the reply's speech and the client: it holds the first few
words (no longer than the clause chunker waits for its first chunk anyway) and any word
that could still grow into a tool's name, and reports a recital as soon as the speech
names a tool (``get_current_time`` or ``getcurrenttime``: names of one plain word, such
as ``calculate``, cannot be told from speech and are not watched). The stage then
decodes the reply again without tools if nothing was released yet, or ends it with the
chunks the TTS already has (the clause being written is not spoken).

It holds no more than that: holding each clause to its mark, tried first, kept the
chunker from seeing the word after a phrase break, and a long first sentence's first
chunk came 200 ms later (`bench e2e`, 2026-11-29).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_WORD_END = re.compile(r"[\w]+$")
_CLAUSE = re.compile(r"[.!?,;:]")


class RecitalGuard:
    """Speech text in, speech text safe to say out (``push``/``flush``); ``recital``
    once a tool's name was in it (everything held is then dropped, and stays so)."""

    def __init__(self, tool_names: Iterable[str], hold_words: int = 4) -> None:
        forms: set[str] = set()
        for name in tool_names:
            if "_" in name:  # (one plain word cannot be told from speech)
                forms |= {name.lower(), name.replace("_", "").lower()}
        self.forms = tuple(sorted(forms))
        self._found = (
            re.compile(r"(?<![\w])(" + "|".join(map(re.escape, self.forms)) + r")(?![\w])")
            if self.forms
            else None
        )
        self.hold_words = hold_words
        self.recital = False
        self.released = False  # anything said yet
        self._buf = ""

    def push(self, text: str) -> str:
        if self.recital:
            return ""
        self._buf += text
        low = self._buf.lower()
        if self._found is not None and self._found.search(low):
            self.recital, self._buf = True, ""
            return ""
        if not self.released and not self._first_words_known(low):
            return ""
        keep = self._partial_name(low)
        out, self._buf = self._buf[: len(self._buf) - keep], self._buf[len(self._buf) - keep :]
        self.released = self.released or bool(out.strip())
        return out

    def flush(self) -> str:
        """The reply's pass ended: what is held is said (a name cut short is a word)."""
        out, self._buf = ("" if self.recital else self._buf), ""
        self.released = self.released or bool(out.strip())
        return out

    def _first_words_known(self, low: str) -> bool:
        """The opening words are past where a recital shows (``hold_words`` whole words,
        or a clause mark after a word): the chunker would not have spoken sooner."""
        words = low.split()
        whole = len(words) - (0 if low[-1:].isspace() else 1)
        return whole >= self.hold_words or (whole >= 1 and bool(_CLAUSE.search(low)))

    def _partial_name(self, low: str) -> int:
        """Length of the trailing word if it could still grow into a tool's name."""
        m = _WORD_END.search(low)
        if m is None:
            return 0
        word = m.group(0)
        return len(word) if any(f.startswith(word) for f in self.forms) else 0
