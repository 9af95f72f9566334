"""Sentence / clause chunker between the LLM and the TTS (sans-I/O).

Text arrives in small deltas; speakable chunks leave as soon as they are
safe to speak. The first chunk of a reply may end at a clause boundary
(comma, semicolon, colon, dash) once it holds ``first_min_words`` words, so
the TTS can start early. A first sentence may also have no punctuation for
a long while ("The sky is blue because of the scattering of light by tiny
particles in the atmosphere,"): the user would hear nothing until its end, so
once it holds ``first_break_words`` words the first chunk may also end at a
natural spoken break, before a conjunction or a relative word ("The sky is
blue | because of …"). A sentence with no conjunction either ("The moon is
approximately 384,400 kilometers away from Earth.") may break at a phrase: once
the words so far hold a verb with something after it ("The moon is
approximately"), before a number (from ``first_break_words`` words) or a
preposition (from one word more): "The moon is approximately | 384,400 …",
"Tea is made by steeping leaves | in hot water". Without the verb it would cut
a noun phrase ("The capital | of France"). Later chunks end at sentence boundaries, or at a
clause when the sentence grows past ``soft_max_chars``; past
``hard_max_chars`` the text is cut at the last space (never inside a word).

A boundary is only declared once the character after the punctuation has
arrived and is whitespace, so "3.5", "1,000", "e.g." and "Dr. Smith" are
never split, whichever way the deltas are cut: chunking does not depend on
how the text was streamed.
"""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st sr jr vs etc e.g i.e eg ie approx no fig inc ltd co mt ft "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_CLOSERS = "\"')\\]”’»"
_BOUNDARY = re.compile(
    rf"(?P<sent>[.!?…]+)[{_CLOSERS}]*(?=\s)|(?P<clause>[,;:—–])[{_CLOSERS}]*(?=\s)|\n"
)
# Words before which a speaker naturally pauses: conjunctions and relative words. Not
# "that" (also a determiner: "learn that language") nor prepositions ("the capital | of").
BREAK_WORDS = frozenset(
    "and but or so because since although though while whereas which who whose where when "
    "if unless until".split()
)
# Prepositions: a phrase break before them needs a verb phrase in front (see above).
# Not "of" (it binds two nouns: "the current state | of the atmosphere"), "to" (mostly an
# infinitive: "a loan used | to buy"), "per", "than", "like" ("kilometers | per second").
PREPOSITIONS = frozenset(
    "in on at by for with from about into onto over under after before between "
    "through during around near across within without against toward towards "
    "along behind beyond".split()
)
# Finite verbs that make the words before a break a clause ("The moon is …", "It takes
# …"): the copula, auxiliaries, a few verbs replies open with, and contractions. No bare
# forms ("do", "make"): "things to do | in winter" is an infinitive in a noun phrase.
VERBS = frozenset(
    "is are was were am has have had does did can could will would should may might must "
    "takes took makes made means needs helps orbits depends contains reaches lasts weighs "
    "covers it's that's there's here's what's he's she's they're we're you're i'm".split()
)
# A head never ends on one of these: "is about the | 384" would strand the article.
_NO_END = (
    PREPOSITIONS
    | BREAK_WORDS
    | {"of", "to"}
    | frozenset(
        "the a an this that these those its my your our their his her some any very".split()
    )
)
# A word, or a number's first digit (a number breaks before it as soon as it starts).
_BREAK = re.compile(r"\s(?:(?P<word>[A-Za-z]+)(?=\s)|(?P<num>\d))")
_MARKDOWN = re.compile(r"[*#`_]+")
_SPACES = re.compile(r"\s+")


class Chunker:
    def __init__(
        self,
        first_min_words: int = 3,
        soft_max_chars: int = 120,
        hard_max_chars: int = 220,
        first_break_words: int = 4,
    ) -> None:
        self.first_min_words = first_min_words
        self.first_break_words = first_break_words  # 0: the first chunk needs punctuation
        self.soft_max_chars = soft_max_chars
        self.hard_max_chars = hard_max_chars
        self.reset()

    def reset(self) -> None:
        self.buf = ""
        self.n_chunks = 0

    def push(self, delta: str) -> list[str]:
        """Add reply text; returns the chunks that became speakable."""
        self.buf += delta
        out: list[str] = []
        while True:
            cut = self._find_cut()
            if cut is not None and cut <= self.hard_max_chars:
                self._emit(cut, out)
                continue
            # Too long without a boundary: cut at the last space before the limit
            # (exactly where a char-by-char stream would have been cut).
            space = self.buf.rfind(" ", 0, self.hard_max_chars + 1)
            if len(self.buf) > self.hard_max_chars and space > 0:
                self._emit(space, out)
                continue
            if cut is not None:  # one enormous "word" (a URL?) before the boundary
                self._emit(cut, out)
                continue
            return out

    def flush(self) -> str | None:
        """End of reply: whatever is left, if it has anything speakable."""
        text = _clean(self.buf)
        self.buf = ""
        if not _speakable(text):
            return None
        self.n_chunks += 1
        return text

    def _emit(self, cut: int, out: list[str]) -> None:
        text = _clean(self.buf[:cut])
        self.buf = self.buf[cut:].lstrip()
        if _speakable(text):
            out.append(text)
            self.n_chunks += 1

    def _find_cut(self) -> int | None:
        """End index of the first chunk the buffer completes, or None."""
        cut = self._punctuation_cut()
        if self.n_chunks == 0 and self.first_break_words > 0:
            brk = self._break_cut(cut)
            if brk is not None:
                return brk
        return cut

    def _break_cut(self, before: int | None) -> int | None:
        """First chunk only: the start of a break word (or a phrase break: a number or a
        preposition after a verb phrase) that follows enough words and comes before the
        punctuation cut, if any. A word counts once the character after it has arrived
        ("and" vs "android"); a number as soon as its first digit has."""
        for m in _BREAK.finditer(self.buf):
            start = m.start()
            if before is not None and start >= before:
                return None
            head = _clean(self.buf[:start]).split()
            word = (m.group("word") or "").lower()
            if word in BREAK_WORDS:
                if len(head) >= self.first_break_words:
                    return start
                continue
            need = self.first_break_words + (0 if m.group("num") else 1)
            if (m.group("num") or word in PREPOSITIONS) and len(head) >= need:
                if _verb_phrase(head):
                    return start
        return None

    def _punctuation_cut(self) -> int | None:
        for m in _BOUNDARY.finditer(self.buf):
            end = m.end()
            head = self.buf[:end]
            if m.group("sent") is not None:
                if m.group("sent") == "." and _not_a_full_stop(head[: m.start() + 1]):
                    continue
                return end
            if m.group("clause") is not None:
                n_words = len(_clean(head).split())
                if self.n_chunks == 0 and n_words >= self.first_min_words:
                    return end
                if len(head) >= self.soft_max_chars:
                    return end
                continue
            if _speakable(_clean(head)):  # a newline: list items, paragraphs
                return end
        return None


def _not_a_full_stop(head: str) -> bool:
    """True when the final '.' of head belongs to an abbreviation, initial or list number."""
    m = re.search(r"(?:^|\s)([\w.]+)\.$", head)
    if m is None:
        return False
    word = m.group(1).lower()
    if word in ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
        return True
    if "." in word:  # "U.S." "e.g." "a.m."
        return all(len(p) <= 2 for p in word.split("."))
    # "1." opening a line, or right after a colon ("tips: 1. Sleep"), is a list marker,
    # not the end of a sentence.
    line_start = head.rfind("\n", 0, m.start(1)) + 1
    before = head[line_start : m.start(1)].strip()
    return word.isdigit() and (before == "" or before.endswith(":"))


def _verb_phrase(words: list[str]) -> bool:
    """The words hold a verb with at least one word after it, do not end on a word that
    needs what follows (an article, a preposition, a conjunction, the verb itself: "a
    year that has | 366 days"), and leave no quote or parenthesis open ("means "joy |
    in loss""): a phrase break, not a cut inside a unit."""
    text = " ".join(words)
    if (
        text.count('"') % 2
        or text.count("“") > text.count("”")
        or text.count("(") > text.count(")")
    ):
        return False
    low = [w.strip(_CLOSERS + "\"'“.,;:!?").lower() for w in words]
    if not low or low[-1] in _NO_END or low[-1] in VERBS:
        return False
    return any(w in VERBS for w in low[:-1])


def _clean(text: str) -> str:
    return _SPACES.sub(" ", _MARKDOWN.sub("", text)).strip()


def _speakable(text: str) -> bool:
    return any(c.isalnum() for c in text)
