"""What the user actually heard of a reply that was cut off (barge-in).

The TTS knows how much audio each text chunk became; the client reports how
many samples of the reply it played. Chunks played to the end were heard
whole; of the chunk playing when the reply was cut, the words are assumed to
be spread over its audio (evenly, or in proportion to per-word weights: the
TTS front-end's spoken length of each original word, so "1969" lasts as long
as "nineteen sixty-nine") and only those whose end was played count. The
words kept are always the chunk's original text.
The LLM's conversation keeps exactly this text, so the next reply does not
build on words the user never heard.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpokenReply:
    """Text chunks of one reply and the seconds of audio each became, in order."""

    chunks: list[tuple[str, float]] = field(default_factory=list)
    # Per chunk, a weight per word of text.split() (None: all words alike).
    weights: list[list[float] | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Chunks given at construction weigh their words alike.
        self.weights += [None] * (len(self.chunks) - len(self.weights))

    def add(self, text: str, seconds: float, weights: list[float] | None = None) -> None:
        if weights is not None and (len(weights) != len(text.split()) or sum(weights) <= 0):
            weights = None  # nothing to go by: spread evenly
        self.chunks.append((text, seconds))
        self.weights.append(weights)

    @property
    def seconds(self) -> float:
        return sum(s for _, s in self.chunks)

    def heard(self, played_s: float) -> str:
        """The prefix of the reply's text whose audio ended within ``played_s``."""
        words: list[str] = []
        t = 0.0
        for (text, secs), weights in zip(self.chunks, self.weights, strict=True):
            if secs <= 0:
                continue  # a chunk that became no audio was never heard
            chunk_words = text.split()
            if t + secs <= played_s + 1e-9:
                words += chunk_words
                t += secs
                continue
            if chunk_words and weights is None:
                per_word = secs / len(chunk_words)
                n = int((played_s - t + 1e-9) // per_word)
                words += chunk_words[: max(0, n)]
            elif chunk_words and weights is not None:
                total, end = sum(weights), 0.0
                for word, w in zip(chunk_words, weights, strict=True):
                    end += w
                    if t + secs * end / total > played_s + 1e-9:
                        break
                    words.append(word)
            break
        return " ".join(words)
