"""Cut a text too long for one synthesis pass at its most natural boundaries.

The codec LM speaks at most ``max_frames`` codec frames in one pass (its RoPE
table and KV cache, 1,024 frames = 47.5 s). A longer text is cut first at
sentence ends, then (inside a sentence still too long) at clause marks
(, ; : and dashes), then between words, and the pieces are packed greedily:
each piece is the longest run of whole units that still fits. Whether a piece
fits is the caller's question (``fits``: plan the piece's frames), so this
module knows no model. A single word that does not fit raises ``Unsplittable``.

Pieces are the original words joined by single spaces: the TTS front-end
collapses whitespace anyway, and every word stays in exactly one piece, in order.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# A word ends a sentence if it ends with . ! ? or … (closing quotes/brackets may follow).
_SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*$")
# A word ends a clause if it ends with , ; or : (closing quotes/brackets may follow).
_CLAUSE_END = re.compile(r"[,;:][\"'\u201d\u2019)\]]*$")
_DASHES = {"-", "--", "\u2013", "\u2014"}

SENTENCE, CLAUSE, WORD = 0, 1, 2


class Unsplittable(ValueError):
    """A single word is too long for one pass: there is no boundary left to cut at."""

    def __init__(self, word: str) -> None:
        super().__init__(f"the word {word[:60]!r} alone is too long to synthesise in one pass")
        self.word = word


def _ends_unit(words: list[str], i: int, level: int) -> bool:
    """Is there a boundary of ``level`` (or a stronger one) after words[i]?"""
    w = words[i]
    if _SENTENCE_END.search(w):
        return True
    if level >= CLAUSE and (_CLAUSE_END.search(w) or w in _DASHES or w.endswith("\u2014")):
        return True
    return level >= WORD


def units(words: list[str], level: int) -> list[list[str]]:
    """``words`` grouped into sentences (SENTENCE), clauses (CLAUSE) or words (WORD)."""
    out: list[list[str]] = []
    cur: list[str] = []
    for i, w in enumerate(words):
        cur.append(w)
        if _ends_unit(words, i, level):
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def split_to_fit(text: str, frames: Callable[[str], int], limit: int) -> list[str]:
    """``text`` as one piece if ``frames(text) <= limit``, else pieces cut at the
    strongest boundaries, each within ``limit``. Raises ``Unsplittable`` when a
    single word does not fit.

    Packing is greedy on an estimate: the sum of the units' frames planned alone
    (cheap: short texts), then each packed piece is planned once as a whole and
    gives back its last units while it is over (a unit's plan alone adds its own
    edge silences, so the sum usually over-estimates). Planning every growing
    candidate instead costs a long plan per unit."""
    if frames(text) <= limit:
        return [text]
    return _pack(text.split(), SENTENCE, frames, limit)


def _pack(words: list[str], level: int, frames: Callable[[str], int], limit: int) -> list[str]:
    us = units(words, level)
    sizes = [frames(" ".join(u)) for u in us]
    out: list[str] = []
    i = 0
    while i < len(us):
        if sizes[i] > limit:  # this sentence (clause) alone is too long: cut it finer
            if level >= WORD:
                raise Unsplittable(us[i][0])
            out += _pack(us[i], level + 1, frames, limit)
            i += 1
            continue
        j, est = i + 1, sizes[i]
        while j < len(us) and est + sizes[j] <= limit:
            est += sizes[j]
            j += 1
        while j - i > 1 and frames(" ".join(w for u in us[i:j] for w in u)) > limit:
            j -= 1
        out.append(" ".join(w for u in us[i:j] for w in u))
        i = j
    return out
