"""Manual turns of a Realtime session (turn detection off), sans-I/O: which ASR turns each
``input_audio_buffer.commit`` covers, and when all their finals are in.

The ASR still segments the audio between two commits into turns of its own (each with
a final transcript, or none: too short, or no words); the client's commit makes all of
them one user item. The commit reaches the ASR in order with the audio (a marker frame
the ASR passes on), so the turns heard before the marker are the commit's. Finals may
arrive before or after the marker; an item is complete when the marker came and every
one of its turns has its final, and items complete in commit order.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Commit:
    item_id: str
    turns: list[int] | None = None  # known once the ASR reached the commit
    texts: dict[int, str] = field(default_factory=dict)


class CommitTracker:
    def __init__(self) -> None:
        self._seen: dict[int, str | None] = {}  # turns heard since the last marker → final
        self._commits: list[_Commit] = []

    def commit(self, item_id: str) -> None:
        """The client committed: its marker is on its way to the ASR."""
        self._commits.append(_Commit(item_id))

    def clear(self) -> None:
        """The client cleared the buffer: the turns heard since the last marker are void."""
        self._seen.clear()

    def heard(self, turn: int) -> None:
        """The ASR opened ``turn`` (speech started)."""
        self._seen[turn] = None

    def final(self, turn: int, text: str) -> list[tuple[str, str]]:
        """``turn``'s final transcript ("" for none); returns the items now complete."""
        if turn in self._seen:  # its commit has not reached the ASR yet
            self._seen[turn] = text
            return []
        for c in self._commits:
            if c.turns is not None and turn in c.turns:
                c.texts[turn] = text
        return self._complete()

    def reached(self, item_id: str) -> list[tuple[str, str]]:
        """The ASR passed ``item_id``'s marker; returns the items now complete."""
        for c in self._commits:
            if c.item_id == item_id and c.turns is None:
                c.turns = list(self._seen)
                c.texts = {t: x for t, x in self._seen.items() if x is not None}
                self._seen = {}
        return self._complete()

    def _complete(self) -> list[tuple[str, str]]:
        done = []
        while self._commits:
            c = self._commits[0]
            if c.turns is None or any(t not in c.texts for t in c.turns):
                break
            self._commits.pop(0)
            done.append((c.item_id, " ".join(c.texts[t] for t in c.turns if c.texts[t])))
        return done
