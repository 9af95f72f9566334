"""What the user actually heard of a reply that was cut off (barge-in).

The TTS knows how much audio each text chunk became; the client reports how
many samples of the reply it played. Chunks played to the end were heard
whole; of the chunk playing when the reply was cut, the words are assumed to
be spread evenly over its audio and only those whose end was played count.
The LLM's conversation keeps exactly this text, so the next reply does not
build on words the user never heard.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpokenReply:
    """Text chunks of one reply and the seconds of audio each became, in order."""

    chunks: list[tuple[str, float]] = field(default_factory=list)

    def add(self, text: str, seconds: float) -> None:
        self.chunks.append((text, seconds))

    @property
    def seconds(self) -> float:
        return sum(s for _, s in self.chunks)

    def heard(self, played_s: float) -> str:
        """The prefix of the reply's text whose audio ended within ``played_s``."""
        words: list[str] = []
        t = 0.0
        for text, secs in self.chunks:
            if secs <= 0:
                continue  # a chunk that became no audio was never heard
            chunk_words = text.split()
            if t + secs <= played_s + 1e-9:
                words += chunk_words
                t += secs
                continue
            if chunk_words:
                per_word = secs / len(chunk_words)
                n = int((played_s - t + 1e-9) // per_word)
                words += chunk_words[: max(0, n)]
            break
        return " ".join(words)
