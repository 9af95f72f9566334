"""Whose speech the TTS batcher works on next: earliest run-dry first (sans I/O).

Every speaking session's synthesis runs on one TTS worker (schedulers/tts_batch.py),
which after each batched codec-LM step makes one vocoder push. Which one? Audio
plays in real time once it is out, so each session has a moment when what it
has been sent runs out: its deadline. A reply that has no audio yet is due the
moment its text arrived (its user is waiting in silence, ``tts.ttfa``); a
session with three seconds queued can wait almost three seconds. Serving the
earliest deadline first gives the waiting replies their first audio ahead of
the long tails of replies already speaking, without letting those tails run dry
while any other work could wait.

A session far ahead of its deadline is not worked on at all (``ahead_s``): its
CPU goes to the other sessions' TTS and to the LLM and ASR instead of audio
that would sit in a buffer.

Times are seconds on any monotonic clock the caller uses consistently.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

_PRUNE_AT = 64  # sessions remembered before stale ones are dropped
_STALE_S = 60.0  # a session whose audio ran out this long ago is as good as new


@dataclass(frozen=True)
class Want:
    """A synthesis in the batcher: its session and when its text arrived."""

    job: int
    session: Hashable
    submitted_s: float


class RunDry:
    """Each session's run-dry time from the audio it has been sent."""

    def __init__(self, ahead_s: float = 2.0) -> None:
        self.ahead_s = ahead_s
        self._dry: dict[Hashable, float] = {}

    def sent(self, session: Hashable, now_s: float, seconds: float) -> None:
        """``seconds`` of a session's audio went out at ``now_s``: it plays after what was
        queued (or from now, if that had run out)."""
        self._dry[session] = max(self._dry.get(session, now_s), now_s) + seconds
        if len(self._dry) > _PRUNE_AT:  # sessions long silent (or gone) cost no memory
            for s, t in list(self._dry.items()):
                if t < now_s - _STALE_S:
                    del self._dry[s]

    def deadline(self, w: Want) -> float:
        """When the session runs out of audio if this synthesis gives it none: the end of
        what it was sent, or (nothing left queued) the moment the text arrived."""
        return max(self._dry.get(w.session, w.submitted_s), w.submitted_s)

    def order(self, wants: list[Want]) -> list[Want]:
        """Earliest deadline first; ties by arrival."""
        return sorted(wants, key=lambda w: (self.deadline(w), w.submitted_s, w.job))

    def due(self, wants: list[Want], now_s: float) -> list[Want]:
        """The syntheses worth working on now, most urgent first: those due within
        ``ahead_s``."""
        return [w for w in self.order(wants) if self.deadline(w) <= now_s + self.ahead_s]

    def wake_s(self, wants: list[Want]) -> float | None:
        """When the earliest of ``wants`` becomes due (None: none)."""
        if not wants:
            return None
        return min(self.deadline(w) for w in wants) - self.ahead_s
