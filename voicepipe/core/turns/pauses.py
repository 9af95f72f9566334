"""What happened in each pause of a turn, for the ``turns.pause`` span. Sans-I/O.

Why a turn was cut in a pause, or why a finished one waited, depends on the order of a
few events inside that pause: when the pause's decode began and how long it took, when
its transcript went out, when the LLM's P(end) for it reached the endpointer, and what
silence the endpointer then required. ``PauseLog`` keeps those for the open turn's
current pause; ``close`` gives them as span attributes once the pause is over, because
the user spoke again ("resumed") or the endpoint fired (its reason). Every time is the
trailing silence (media ms since the last speech sample) when it happened: audio arrives
in real time, so it is also the wall time since the pause began, and it is what the
endpointer compares with the silence it needs.
"""

from __future__ import annotations

from dataclasses import dataclass

JsonScalar = str | int | float | bool


@dataclass
class _Pause:
    speech_end_media_ns: int
    needed_ms: float  # the silence the endpointer required when the pause began
    decode_at_ms: float | None = None  # the pause's decode started
    decode_ms: float | None = None  # and took this long
    stable_at_ms: float | None = None  # its transcript went out (TranscriptStable)
    text: str = ""
    p_end: float | None = None
    p_end_at_ms: float | None = None  # the endpointer first had P(end) for this pause
    needed_after_ms: float | None = None  # the silence it required once it had P(end)


class PauseLog:
    """The open turn's current pause (one at a time: speech after it closes it).

    ``min_ms``: shorter silences (the gaps between words) are not pauses worth a span."""

    def __init__(self, min_ms: float) -> None:
        if min_ms < 0:
            raise ValueError(f"min_ms must be >= 0, got {min_ms}")
        self.min_ms = min_ms
        self._p: _Pause | None = None

    def _current(self, speech_end_media_ns: int) -> _Pause | None:
        p = self._p
        return p if p is not None and p.speech_end_media_ns == speech_end_media_ns else None

    def silence(self, speech_end_media_ns: int, silence_ms: float, needed_ms: float) -> None:
        """A chunk of trailing silence: opens the pause once it is ``min_ms`` long (a pause
        of an earlier speech end that was never closed is dropped: speech came after it)."""
        if self._current(speech_end_media_ns) is None:
            self._p = None
            if silence_ms >= self.min_ms:
                self._p = _Pause(speech_end_media_ns, needed_ms)

    def decoding(self, speech_end_media_ns: int, at_ms: float) -> None:
        """The pause's decode starts (late if the decoder was busy with a partial)."""
        p = self._current(speech_end_media_ns)
        if p is not None and p.decode_at_ms is None:
            p.decode_at_ms = at_ms

    def decoded(self, speech_end_media_ns: int, took_ms: float) -> None:
        p = self._current(speech_end_media_ns)
        if p is not None and p.decode_ms is None:
            p.decode_ms = took_ms

    def stable(self, speech_end_media_ns: int, at_ms: float, text: str) -> None:
        p = self._current(speech_end_media_ns)
        if p is not None and p.stable_at_ms is None:
            p.stable_at_ms, p.text = at_ms, text

    def estimate(
        self, speech_end_media_ns: int, at_ms: float, p_end: float, needed_ms: float
    ) -> None:
        p = self._current(speech_end_media_ns)
        if p is not None and p.p_end is None:
            p.p_end, p.p_end_at_ms, p.needed_after_ms = p_end, at_ms, needed_ms

    def close(self, outcome: str, silence_ms: float) -> dict[str, JsonScalar] | None:
        """The pause is over after ``silence_ms`` (``outcome``: "resumed", or the endpoint's
        reason): its attributes, or None if no pause was open."""
        p, self._p = self._p, None
        if p is None:
            return None
        out: dict[str, JsonScalar] = {
            "outcome": outcome,
            "pause_ms": round(silence_ms, 1),
            "needed_ms": round(p.needed_ms, 1),
            "speech_end_media_ms": round(p.speech_end_media_ns / 1e6, 1),
        }
        optional: dict[str, float | None] = {
            "decode_at_ms": p.decode_at_ms,
            "decode_ms": p.decode_ms,
            "stable_at_ms": p.stable_at_ms,
            "p_end_at_ms": p.p_end_at_ms,
            "needed_after_ms": p.needed_after_ms,
        }
        out |= {k: round(v, 1) for k, v in optional.items() if v is not None}
        if p.p_end is not None:
            out["p_end"] = round(p.p_end, 5)
        if p.text:
            out["text"] = p.text
        return out
