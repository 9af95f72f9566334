"""Stable prefixes for partial transcripts (local agreement), so partials do not flicker. Sans-I/O.

Each partial re-decodes the whole utterance so far, and Whisper may rewrite
its last words as more audio arrives. A word is committed once two
consecutive hypotheses agree on it and on every word before it
(LocalAgreement-2, as in Macháček et al. 2023, "Turning Whisper into a
real-time transcription system"); the newest hypothesis's last word is never
committed, since its audio may be cut mid-word. Committed words are never
taken back: a partial is ``committed + the newest hypothesis's words after
them``, so only the uncommitted tail can change between partials. The final
transcript is decoded independently and replaces the partials.

Words are compared case- and punctuation-insensitively ("lights," == "Lights.").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from voicepipe.core.text.wer import normalize

_NON_WORD = re.compile(r"[^\w']+")


def word_key(word: str) -> str:
    return _NON_WORD.sub("", word.lower())


def split_words(text: str) -> list[str]:
    return text.split()


def agreement(a: list[str], b: list[str]) -> int:
    """Length of the longest common word prefix of ``a`` and ``b``."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if word_key(x) != word_key(y):
            break
        n += 1
    return n


def unstable_words(partial: str, final: str) -> int:
    """How many trailing words of ``partial`` are not a prefix of ``final`` (flicker measure).

    Both sides are normalised as for WER first, so "3 apples" agrees with "three apples".
    """
    p, f = normalize(partial).split(), normalize(final).split()
    return len(p) - agreement(p, f)


@dataclass(frozen=True)
class Partial:
    text: str  # what to show: stable + tail
    stable: str  # committed words; only ever grows within a turn
    # The committed words as the newest hypothesis spells them (case, punctuation), when it
    # agrees with all of them (else as committed), and that hypothesis itself: what the
    # final, a decode of still more audio, most likely repeats. The streaming prefill feeds
    # these: a committed "turn on the" from an early decode against the final's "Turn on
    # the kitchen lights." differs in its first token, and the LLM's cache would keep none
    # of the user's words.
    agreed: str = ""
    heard: str = ""


class StablePrefix:
    """One turn's partials. ``update`` with each new hypothesis of the growing audio."""

    def __init__(self) -> None:
        self.committed: list[str] = []
        self._prev: list[str] | None = None

    def update(self, hypothesis: str) -> Partial:
        words = split_words(hypothesis)
        if self._prev is not None:
            n = min(agreement(self._prev, words), len(words) - 1)
            if n > len(self.committed) and agreement(self.committed, words) == len(self.committed):
                # Extend, keeping the committed words exactly as first shown.
                self.committed = self.committed + words[len(self.committed) : n]
        self._prev = words
        n = len(self.committed)
        tail = words[n:]
        agreed = words[:n] if agreement(self.committed, words) == n else self.committed
        return Partial(
            text=" ".join(self.committed + tail),
            stable=" ".join(self.committed),
            agreed=" ".join(agreed),
            heard=" ".join(words),
        )

    @property
    def stable(self) -> str:
        return " ".join(self.committed)
