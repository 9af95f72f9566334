"""Semantic end of turn: how long a pause ends the user's turn, given how finished the words
sound. Sans-I/O.

While the user speaks, the LLM stage prefills the words the partial transcripts agree on
into its KV cache (stages/llm/ahead.py); the pass that prefills the pause's transcript also
yields, for free, the model's probability that the user's message ends there: P(the chat
template's end-of-user-turn token, ``<|im_end|>`` for ChatML) after the words so far.
"What is the capital of France?" scores high; "what is the capital of", "um" or "my
number is five five five" low. The endpointer (core/turns/endpoint.py) then asks for
less silence when P(end) is high and more when it is low:

    silence needed = min_ms                     if P(end) >= p_hi
                   = max_ms                     if P(end) <= p_lo
                   = between, linear in log P   otherwise
                   = unknown_ms (vad.end_silence_ms) while no P(end) is known

``eagerness`` picks the numbers (``[turns] eagerness``; the Realtime API's
``semantic_vad`` eagerness maps onto it): ``high`` answers soonest and waits least
through an unfinished sentence, ``low`` the other way round, ``auto`` is ``medium``
(as in the Realtime API), ``off`` ignores P(end) (silence only). The probability
thresholds were chosen on the text set of ``voicepipe bench eot`` (docs/benchmarks/eot.md).

``EndOfTurnBoard`` is how the estimate travels from the LLM stage (which computes it) to
the ASR stage (whose endpointer uses it): one object per session, shared like the
``TurnCounter``; an estimate counts only for the turn and the speech end it was made for,
so words spoken after it void it. Each estimate names its ``source`` (the model that read
it); a board whose ``source`` is set takes estimates from that source only: with a
separate P(end) model (``[turns] p_end_model``, stages/llm/p_end.py) the reply LLM's own
pass over the pause's words still prefills the reply but its reading never replaces the
estimator's. ``AheadLedger`` keeps the books of the speculative
prefill: what the cache holds ahead of the endpoint, what a revision threw away.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from voicepipe.core.tokens import common_prefix

EAGERNESS_NAMES = ("off", "low", "medium", "high", "auto")


@dataclass(frozen=True)
class Eagerness:
    name: str
    min_ms: int  # the pause that ends a turn whose words sound finished (P(end) >= p_hi)
    max_ms: int  # the pause that ends one that sounds unfinished (P(end) <= p_lo)
    p_hi: float
    p_lo: float
    unknown_ms: int  # no estimate (yet): the plain silence rule (vad.end_silence_ms)

    def __post_init__(self) -> None:
        if not 0.0 < self.p_lo < self.p_hi <= 1.0:
            raise ValueError(f"eagerness {self.name}: need 0 < p_lo < p_hi <= 1")
        if not 0 < self.min_ms <= self.max_ms:
            raise ValueError(f"eagerness {self.name}: need 0 < min_ms <= max_ms")


def eagerness(name: str, end_silence_ms: int = 400) -> Eagerness | None:
    """The policy named ``name`` (None for ``off``); ``end_silence_ms`` is the wait while
    no estimate is known, and never more than a finished-sounding turn's ``min_ms``
    would make it (an estimate may only shorten or lengthen, not be needed)."""
    key = "medium" if name == "auto" else name
    if key == "off":
        return None
    table = {
        # (min_ms, max_ms, p_hi, p_lo)
        # On `bench eot`'s set the 135M gave every unfinished transcript P(end) <= 1e-4
        # and every finished one >= 0.004 (docs/benchmarks/eot.md): p_lo sits between.
        # max_ms is the Realtime API's longest wait for each semantic_vad eagerness (2 / 4
        # / 8 s): a pause of up to 1.5 s inside a number or a clause must not end the turn,
        # and the pause also waits that long while the estimate is on its way.
        "high": (160, 2000, 0.20, 0.001),
        "medium": (200, 4000, 0.30, 0.002),
        "low": (320, 8000, 0.50, 0.005),
    }
    if key not in table:
        raise ValueError(f"unknown eagerness {name!r} (one of {', '.join(EAGERNESS_NAMES)})")
    lo_ms, hi_ms, p_hi, p_lo = table[key]
    return Eagerness(key, lo_ms, hi_ms, p_hi, p_lo, max(end_silence_ms, lo_ms))


def silence_needed_ms(p_end: float | None, e: Eagerness) -> float:
    """The trailing silence that ends the turn, given P(end) (None: not known)."""
    if p_end is None or math.isnan(p_end):
        return float(e.unknown_ms)
    if p_end >= e.p_hi:
        return float(e.min_ms)
    if p_end <= e.p_lo:
        return float(e.max_ms)
    # Log-linear between the thresholds: P(end) spans orders of magnitude.
    x = (math.log(p_end) - math.log(e.p_lo)) / (math.log(e.p_hi) - math.log(e.p_lo))
    return e.max_ms + x * (e.min_ms - e.max_ms)


def turn_over(silence_ms: float, p_end: float | None, e: Eagerness) -> bool:
    """Has a pause of ``silence_ms`` ended the turn?"""
    return silence_ms >= silence_needed_ms(p_end, e)


# Words after which a sentence cannot end: fillers, and the function words that announce
# more ("the capital of", "a table for", "call me and"). Whisper writes a pause inside a
# sentence as "...", a list as a trailing comma, and sometimes "?" after a cut clause
# ("How far is it from London to?"), which the LLM then reads as a finished question.
_FILLERS = frozenset("um uh uhm umm er erm hmm mm".split())
# Only words a request practically never ends on: not the particles that end many
# ("turn it on", "what is it about", "where are you from"), nor "is" ("what time it is").
_OPEN_WORDS = frozenset(
    """a an the my your our their
    of to for with
    and or but nor because if than although though whereas""".split()
)
UNFINISHED_P = 1e-4  # what a cue makes of P(end): below every eagerness's p_lo


def unfinished_cue(text: str) -> str | None:
    """Why ``text`` (a pause's transcript) cannot be the end of the user's turn, if a word
    or mark says so: "filler", "open word", "comma" or "ellipsis"; None: no such cue."""
    t = text.strip()
    if not t:
        return None
    if t.endswith(("...", "…")):
        return "ellipsis"
    if t.endswith(","):
        return "comma"
    words = t.lower().split()
    last = "".join(c for c in words[-1] if c.isalpha() or c == "'")
    if last in _FILLERS:
        return "filler"
    if last in _OPEN_WORDS and len(words) > 1:
        return "open word"
    return None


def p_end_read(p_model: float, text: str) -> float:
    """The P(end) the endpointer goes by: the model's, unless the transcript ends on a
    cue that the sentence goes on (then at most ``UNFINISHED_P``)."""
    return min(p_model, UNFINISHED_P) if unfinished_cue(text) else p_model


@dataclass(frozen=True)
class Estimate:
    turn: int
    speech_end_media_ns: int  # the last speech sample the transcript it was read from heard
    p_end: float
    text: str
    source: str = ""  # the model that read it ("": not said)


class EndOfTurnBoard:
    """One session's latest P(end), written by the LLM stage, read by the ASR's endpointer.

    ``estimator``: something will answer each pause's transcript (the LLM stage sets it
    when it has a streaming prefill), so the endpointer may wait for the answer; that
    answer is an estimate (``post``) or a refusal (``decline``: no estimate will come for
    this pause, e.g. a reply of the session holds the cache): the endpointer then goes by
    silence alone instead of waiting.

    ``source``: who answers the pauses ("": whoever posts). When set, a post or a decline
    naming another source is refused (``post`` returns False, nothing changes): one
    estimator per board, so the endpointer never sees two readings of one pause from two
    models, nor a slower model's reading replace (or a refusal void) the faster one's."""

    def __init__(self) -> None:
        self.latest: Estimate | None = None
        self.posted = 0
        self.refused = 0  # posts and declines from another source than ``source``
        self.estimator = False
        self.source = ""
        self._declined: tuple[int, int] | None = None
        # Called after each post or decline: the reader applies it at once, not when its
        # next audio comes (the ASR stage wakes its endpointer; Endpointer.poll).
        self.listeners: list[Callable[[], None]] = []

    def _changed(self) -> None:
        for f in self.listeners:
            f()

    def _accepts(self, source: str) -> bool:
        if self.source and source != self.source:
            self.refused += 1
            return False
        return True

    def decline(self, turn: int, speech_end_media_ns: int, source: str = "") -> bool:
        if not self._accepts(source):
            return False
        self._declined = (turn, speech_end_media_ns)
        self._changed()
        return True

    def declined(self, turn: int, speech_end_media_ns: int) -> bool:
        return self._declined == (turn, speech_end_media_ns)

    def post(
        self, turn: int, speech_end_media_ns: int, p_end: float, text: str = "", source: str = ""
    ) -> bool:
        """Post an estimate; False (nothing posted) when ``source`` is not the board's."""
        if not 0.0 <= p_end <= 1.0:
            raise ValueError(f"P(end) must be a probability, got {p_end}")
        if not self._accepts(source):
            return False
        self.latest = Estimate(turn, speech_end_media_ns, p_end, text, source)
        self.posted += 1
        self._changed()
        return True

    def p_end(self, turn: int, speech_end_media_ns: int) -> float | None:
        """The estimate for exactly this turn and speech end, else None."""
        e = self.latest
        if e is None or e.turn != turn or e.speech_end_media_ns != speech_end_media_ns:
            return None
        return e.p_end


@dataclass
class AheadLedger:
    """The books of one session's speculative prefill (prefill ahead of the endpoint).

    ``held``: the prompt tokens the cache holds after the last ahead pass (the conversation,
    the user header and the words so far). A new target keeps their common prefix and
    rolls back the rest; the counters add up over a turn (``reset`` at a new turn) and
    feed the ``llm.prefill_ahead`` span: tokens prefilled ahead, rolled back, passes."""

    held: list[int] | None = None
    base: int | None = None  # tokens the cache held before the turn's first ahead pass
    prefilled: int = 0  # tokens the ahead passes ran through the model
    rolled_back: int = 0  # of the held tokens, those a revision (or the final) discarded
    passes: int = 0
    texts: int = 0  # ahead targets seen (partials and pause transcripts)

    def reset(self) -> None:
        self.held = self.base = None
        self.prefilled = self.rolled_back = self.passes = self.texts = 0

    def plan(self, target: list[int]) -> int:
        """How many leading tokens of ``target`` the ahead passes already hold."""
        return 0 if self.held is None else common_prefix(self.held, target)

    def fed(self, target: list[int], ran: int, passes: int, base: int = 0) -> None:
        """The cache now holds ``target``: ``ran`` tokens run through the model to get there
        in ``passes`` passes; held tokens past the common prefix were thrown away. ``base``:
        of ``target``, the tokens the cache held before this turn's first pass."""
        if ran < 0 or passes < 0:
            raise ValueError("ran and passes count work done: never negative")
        if self.base is None:
            self.base = min(base, len(target))
        if self.held is not None:
            self.rolled_back += len(self.held) - common_prefix(self.held, target)
        self.held = list(target)
        self.prefilled += ran
        self.passes += passes
        self.texts += 1

    def settle(self, prompt: list[int]) -> tuple[int, int]:
        """The reply's prompt is ``prompt``: (tokens of the user's turn the ahead passes
        held and it keeps, tokens they held that it does not start with, now rolled back).
        The books stay readable until ``reset``; settling again on the same prompt (a
        tentative reply dropped, the final answered anew) counts nothing twice."""
        if self.held is None:
            return 0, 0
        common = common_prefix(self.held, prompt)
        dropped = len(self.held) - common
        self.rolled_back += dropped
        self.held = self.held[:common]  # what the cache keeps of it
        return max(0, common - (self.base or 0)), dropped

    @property
    def wasted_share(self) -> float:
        """Share of the ahead work thrown away (rolled back / prefilled ahead)."""
        return self.rolled_back / self.prefilled if self.prefilled else 0.0
