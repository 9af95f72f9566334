"""TTS text front-end (sans-I/O): what the LLM wrote → words a TTS can say.

LLM replies carry digits, list markers, markdown, quotes, symbols, URLs and
emoji that a grapheme-to-phoneme front-end reads badly (a URL letter by
letter, "e.g." as "E.G."; quote marks are phonemes of their own to hibari's
G2P and threw the codec LM off: docs/BENCHMARKS.md, bench textnorm). Both TTS
backends (hibari and the codec LM, which share hibari's G2P) speak
``normalize(text)`` instead of the text itself:

    "1. Read "Romeo and Juliet" (1597) — it's ~3 hrs 😀"
    → "First, Read Romeo and Juliet, fifteen ninety-seven, it's about three hours"

The rules (core/text/rules.py) are tried at word starts of the original text,
left to right, and every output character remembers the span of the original
it came from. The pipeline keeps the *original* text for everything else
(the chunker, ``ReplyEnd``, the conversation, barge-in trimming);
``Normalized.word_weights`` tells the barge-in bookkeeping (core/turns/heard.py)
how long each original word takes to say, so "1969" counts as the three words
it is spoken as.

Output characters: letters (and combining marks on them), spaces, the
apostrophe and hyphen inside words, and ``. , ! ? :`` — the punctuation of
the codec LM's training sentences (a semicolon is said as a comma).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

from voicepipe.core.text import rules

PUNCT = frozenset(".,!?;:")
_STOPS = frozenset(".!?")
_WORD = re.compile(r"\S+")
_SPOKEN_WORD = re.compile(r"[^\s.,!?;:-]+")


@dataclass(frozen=True)
class Normalized:
    """The spoken text and, per output character, the original span it came from."""

    source: str
    text: str
    spans: tuple[tuple[int, int], ...]  # one (start, end) into ``source`` per char of ``text``

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The original characters behind ``text[start:end]`` (empty at ``start`` if none)."""
        sel = self.spans[start:end]
        if not sel:
            at = self.spans[start][0] if start < len(self.spans) else len(self.source)
            return at, at
        return min(a for a, _ in sel), max(b for _, b in sel)

    def word_weights(self) -> list[float]:
        """For each whitespace-separated word of the original (``source.split()``), how many
        words it is spoken as: 0 for a dropped word (an emoji), 3 for "1969" ("nineteen
        sixty-nine"; hyphenated parts count), 1 for a plain word.

        A rule's words are spread over the original words its match covered in
        proportion to position ("March 3, 2024" → "March third, twenty twenty-four")."""
        words = [m.start() for m in _WORD.finditer(self.source)]
        weights = [0.0] * len(words)
        if not words:
            return weights
        where = self._positions()
        for m in _SPOKEN_WORD.finditer(self.text):
            pos = where[(m.start() + m.end() - 1) // 2]
            weights[max(0, bisect.bisect_right(words, pos) - 1)] += 1.0
        return weights

    def _positions(self) -> list[float]:
        """Per output character, a point in the original: a rule's output is laid evenly
        over the characters it replaced."""
        out: list[float] = []
        i = 0
        while i < len(self.spans):
            a, b = self.spans[i]
            j = i
            while j < len(self.spans) and self.spans[j] == (a, b):
                j += 1
            out += [a + (b - a) * (k + 0.5) / (j - i) for k in range(j - i)]
            i = j
        return out


def normalize(text: str) -> str:
    """``text`` as speakable English words (see the module docstring)."""
    return normalize_spans(text).text


# The rewrite rules, in priority order; a link's words and an address's pieces are read by
# normalize itself (handed to rules.py rather than imported back from there).
RULES = rules.build(normalize)


def normalize_spans(text: str) -> Normalized:
    out: list[str] = []
    spans: list[tuple[int, int]] = []

    def put(s: str, a: int, b: int) -> None:
        for ch in s:
            out.append(ch)
            spans.append((a, b))

    pos, n = 0, len(text)
    after_rule = False
    while pos < n:
        ch = text[pos]
        mid_word = pos > 0 and ch.isalpha() and text[pos - 1].isalpha()
        if not mid_word:
            hit = _apply_rules(text, pos)
            if hit is not None:
                end, words = hit
                if words[:1].isalnum() and out and out[-1].isalnum():
                    put(" ", pos, pos)  # a rule's words never run into the word before ("GPT4")
                put(words, pos, end)
                pos, after_rule = end, True
                continue
        if after_rule and ch.isalnum() and out and out[-1].isalnum():
            put(" ", pos, pos)  # "3D" → "three D"
        after_rule = False
        put(_plain_char(text, pos, out), pos, pos + 1)
        pos += 1
    return _tidy(text, out, spans)


def _apply_rules(text: str, pos: int) -> tuple[int, str] | None:
    for rx, handler in RULES:
        m = rx.match(text, pos)
        if m is None or m.end() == pos:
            continue
        words = handler(m)
        if words is not None:
            return m.end(), words
    return None


def _plain_char(text: str, pos: int, out: list[str]) -> str:
    """A character no rule took: letters and sentence punctuation stay, a line break ends
    a sentence, everything else (emoji, stray symbols) becomes a space."""
    ch = text[pos]
    if ch == ";":
        return ","  # the same pause; the codec LM never saw a ";" phoneme in training
    if ch.isalpha() or ch in PUNCT:
        return ch
    if ch in "\n\r":
        return ". " if out and out[-1].isalnum() else " "
    if ch.isspace():
        return " "
    if (
        unicodedata.category(ch).startswith("M")
        and pos > 0
        and text[pos - 1].isalpha()
        and out[-1:] == [text[pos - 1]]
    ):
        return ch  # a combining accent on the letter before it
    if ch.isdigit():  # a digit no number rule read (another script's digits)
        return f" {unicodedata.name(ch, 'digit').split()[-1].lower()} "
    return " "


def _tidy(source: str, chars: list[str], spans: list[tuple[int, int]]) -> Normalized:
    """One space between words, none before punctuation or at the ends, one punctuation
    mark at a time (the stronger of a comma and a full stop wins), none at the start."""
    out: list[str] = []
    sp: list[tuple[int, int]] = []
    for ch, span in zip(chars, spans, strict=True):
        if ch.isspace():
            if out and out[-1] != " ":
                out.append(" ")
                sp.append(span)
            continue
        if ch in PUNCT:
            if out and out[-1] == " ":  # no space before punctuation
                out.pop()
                sp.pop()
            if not out:
                continue  # nothing said yet
            if out[-1] in PUNCT:
                if ch in _STOPS and out[-1] not in _STOPS:
                    out[-1], sp[-1] = ch, span  # ", ." → "."
                continue
        out.append(ch)
        sp.append(span)
    while out and out[-1] == " ":
        out.pop()
        sp.pop()
    if out and all(c in PUNCT or c.isspace() for c in out):
        out, sp = [], []
    return Normalized(source, "".join(out), tuple(sp))
