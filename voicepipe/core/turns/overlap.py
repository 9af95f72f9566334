"""Speech heard while the assistant talks: a backchannel, the assistant's own echo, or a
real interruption. Sans-I/O.

Barge-in used to be speech onset alone: any VAD onset during a reply cancelled it, so a
listener's "mm-hmm", a cough, or the assistant's own voice coming back through a
speakerphone stopped the answer, and the backchannel then became a turn of its own that
the LLM answered. ``OverlapJudge`` decides one overlapping user turn by its *words* (the
ASR's partial and final transcripts) and its duration, not by energy:

- words outside the backchannel lexicon ("wait", "stop", "no, I meant Spain") that are not
  the assistant's own words → **interrupt**, on the first partial that shows them;
- only backchannel words ("mm-hmm", "yeah", "right", "okay", "uh-huh", "I see"), or no
  words at all (a cough, laughter, a click too short to be a turn) → **backchannel** once
  the turn is over: the reply goes on and the turn never reaches the LLM;
- words that are (nearly all) the assistant's reply → **echo**, settled the same way;
- a turn far quieter than the user's usual voice (``quiet_gap_db``, core/turns/level.py)
  → **echo** too, whatever its words: the residue the echo canceller left;
- a turn still undecided after ``max_wait_ms`` of speech with no echo in it (someone who
  keeps talking means it, whatever Whisper made of it) → **interrupt**.

A partial that looks like a backchannel or echo does not settle the turn (the user may go
on: "yeah, but …"); only the end of the turn does. The reference for echo is what the
caller sets: in the server, the reply's words the loudspeaker played from a couple of
seconds before the speech began until now (``set_reference``, from
core/playout/speaker.py), so a user who repeats words the reply said earlier is heard; a
caller with no playback timing gives the reply's whole text (``add_reference``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from voicepipe.core.text.wer import normalize


class Verdict(Enum):
    PENDING = "pending"
    BACKCHANNEL = "backchannel"
    ECHO = "echo"
    INTERRUPT = "interrupt"


# Words a listener says to keep the speaker going. "no" is deliberately absent: it usually
# starts a correction ("no, I meant Spain").
BACKCHANNEL_WORDS = frozenset(
    {
        "mm", "mmm", "hmm", "mhm", "hm", "m", "uh", "huh", "um", "umm", "ah", "oh", "aha",
        "yeah", "yes", "yep", "yup", "ya", "right", "okay", "ok", "k", "sure", "cool", "nice",
        "wow", "alright", "exactly", "true", "indeed", "great", "good", "gotcha",
    }
)  # fmt: skip
# Backchannels of two words, whose single words alone ("i", "got", "it") are not ones.
BACKCHANNEL_PHRASES = frozenset(
    {("i", "see"), ("got", "it"), ("all", "right"), ("makes", "sense"), ("of", "course")}
)
# Hums however Whisper spells them: "Mmmm", "Hmmm", "Mhmm", "Uhhh", "Ahh", "Ohh".
_HUM = re.compile(r"(?:u*h*m+h*m*|h+m+|m+h+m+|u+h+|a+h+|o+h+)")
# Whisper's annotations of sounds that are not words: "(coughs)", "[Laughter]", "*sighs*".
_NON_SPEECH = re.compile(r"\([^)]*\)|\[[^\]]*\]|\*[^*]*\*|♪+")


def words_of(text: str) -> list[str]:
    """The spoken words of a transcript: annotations of non-speech dropped, normalised as
    for WER (lower case, no punctuation, hyphens split: "Mm-hmm." → ["mm", "hmm"])."""
    return normalize(_NON_SPEECH.sub(" ", text)).split()


def is_backchannel(words: list[str]) -> bool:
    """Every word belongs to a backchannel (single words or the two-word phrases)."""
    i = 0
    while i < len(words):
        if words[i] in BACKCHANNEL_WORDS or _HUM.fullmatch(words[i]):
            i += 1
        elif tuple(words[i : i + 2]) in BACKCHANNEL_PHRASES:
            i += 2
        else:
            return False
    return True


@dataclass(frozen=True)
class OverlapConfig:
    # Longer than a backchannel is ever said in one breath: undecided speech this long
    # interrupts (unless it is the assistant's echo).
    max_wait_ms: int = 1500
    # A backchannel is short: more words than this are something else.
    max_backchannel_words: int = 4
    # A transcript is echo when at most this share of its words are not the reply's
    # (Whisper mishears some of the echo; two foreign words always count as the user's).
    echo_foreign_share: float = 0.34
    # A turn this much quieter than the user's usual speech level is the echo's residue,
    # whatever words Whisper made of it (core/turns/level.py: the user at -16 dBFS, the
    # residue at -32 to -38; a user who barges in this much softer is not heard until the
    # reply stops). 0: words alone decide.
    quiet_gap_db: float = 10.0

    def __post_init__(self) -> None:
        if self.max_wait_ms <= 0 or self.max_backchannel_words < 1:
            raise ValueError("max_wait_ms must be > 0 and max_backchannel_words >= 1")
        if not 0.0 <= self.echo_foreign_share < 1.0:
            raise ValueError("echo_foreign_share must be in [0, 1)")
        if self.quiet_gap_db < 0:
            raise ValueError("quiet_gap_db must be >= 0")


def classify(words: list[str], reference: frozenset[str], cfg: OverlapConfig) -> Verdict:
    """What a transcript's words say about the turn, were it to end now.

    PENDING means no words yet (decided by duration and the end of the turn)."""
    if not words:
        return Verdict.PENDING
    if len(words) <= cfg.max_backchannel_words and is_backchannel(words):
        return Verdict.BACKCHANNEL
    foreign = [w for w in words if w not in reference]
    if not foreign:
        return Verdict.ECHO
    if len(foreign) <= cfg.max_backchannel_words and is_backchannel(foreign):
        return Verdict.ECHO  # echo with a backchannel over it: still nothing to answer
    if len(foreign) < 2 and len(foreign) <= cfg.echo_foreign_share * len(words):
        return Verdict.ECHO
    return Verdict.INTERRUPT


class OverlapJudge:
    """One user turn that began while a reply was in flight; times are milliseconds since
    the turn's speech started. Once a verdict other than PENDING is returned it is final."""

    def __init__(
        self, cfg: OverlapConfig, reference_text: str = "", user_level_db: float | None = None
    ) -> None:
        self.cfg = cfg
        self.reference = frozenset(words_of(reference_text))
        # Below this level (dBFS, core/turns/level.py) the turn is the echo's residue;
        # None: the user's level is not known yet, words alone decide.
        self.quiet_below_db: float | None = None
        if user_level_db is not None and cfg.quiet_gap_db > 0:
            self.quiet_below_db = user_level_db - cfg.quiet_gap_db
        self.level_db: float | None = None  # the turn's, as of its latest transcript
        self.verdict = Verdict.PENDING
        self._lean = Verdict.PENDING  # what the latest words say, were the turn to end now
        self.text = ""
        self.decided_ms: float | None = None

    def _settle(self, verdict: Verdict, at_ms: float) -> Verdict:
        if self.verdict is Verdict.PENDING and verdict is not Verdict.PENDING:
            self.verdict, self.decided_ms = verdict, at_ms
        return self.verdict

    def add_reference(self, text: str) -> None:
        """More of the reply's text (it is generated while the user speaks)."""
        self.reference = self.reference | frozenset(words_of(text))

    def set_reference(self, words: list[str]) -> None:
        """The reply's words the user may be hearing back now (played moments ago)."""
        self.reference = frozenset(words_of(" ".join(words)))

    def _classify(self, words: list[str], level_db: float | None) -> Verdict:
        if level_db is not None:
            self.level_db = level_db
        below, level = self.quiet_below_db, self.level_db
        if below is not None and level is not None and level < below:
            return Verdict.ECHO  # the room's residue of the reply, not the user
        return classify(words, self.reference, self.cfg)

    def on_partial(self, text: str, at_ms: float, level_db: float | None = None) -> Verdict:
        """``level_db``: the turn's speech level so far (``speech_level_db``), if known."""
        if self.verdict is not Verdict.PENDING:
            return self.verdict
        self.text = text
        self._lean = self._classify(words_of(text), level_db)
        if self._lean is Verdict.INTERRUPT:
            return self._settle(Verdict.INTERRUPT, at_ms)
        return self.on_time(at_ms)

    def on_time(self, at_ms: float) -> Verdict:
        """Speech still going on at ``at_ms``."""
        if self.verdict is Verdict.PENDING and at_ms >= self.cfg.max_wait_ms:
            if self._lean is not Verdict.ECHO:
                return self._settle(Verdict.INTERRUPT, at_ms)
        return self.verdict

    def on_end(self, text: str, at_ms: float, level_db: float | None = None) -> Verdict:
        """The turn is over: ``text`` is its final transcript ("" when the ASR heard no
        words, or the turn was too short to transcribe)."""
        if self.verdict is not Verdict.PENDING:
            return self.verdict
        if text:
            self.text = text
        words = words_of(text)
        lean = self._classify(words, level_db) if words else Verdict.BACKCHANNEL
        return self._settle(lean, at_ms)
