"""Endpointing: VAD probabilities in, speech-start / end-of-turn decisions out. Sans-I/O.

Each call to ``Endpointer.update`` describes one VAD chunk: its speech
probability, its span on the input's media timeline, and ``now_ns``, the wall
time (shared clock) at which its last sample arrived. The endpointer never
reads a clock.

Rules (times are media times, so the outcome does not depend on how fast the
audio is fed):
- A chunk is speech when p ≥ ``threshold`` and silence when p < ``neg_threshold``;
  in between it keeps the previous class (hysteresis, as Silero's own
  segmenter does), so one doubtful chunk neither starts nor breaks a turn.
- Speech starts once ``start_ms`` of consecutive speech has been seen; the
  turn's onset is the first of those chunks. Small on purpose (barge-in waits
  on it): a blip too short to be a turn is filtered at the end instead.
- The turn ends when ``end_silence_ms`` of silence follows the last speech
  chunk (reason "silence"), or when the turn reaches ``max_utterance_ms``
  (reason "max_length": cut there; if the user keeps talking a new turn
  starts), or when the caller calls ``flush`` at the end of the input.
- With a semantic policy (``EndpointConfig.semantic``, core/turns/semantic.py) the
  silence that ends a turn depends on P(end), the LLM's probability that the words so
  far are a whole turn (``set_p_end``, for the current speech end only; speech after it
  voids it): shorter after a finished question, longer through "um" or "the capital
  of …". An estimate that comes between chunks is applied at once by ``poll``. While no
  estimate is known: the policy's longest pause (``max_ms``) if one is
  on its way (``expect_p_end``: the pause's transcript is being decoded, then read by
  the LLM; a pause must not be cut just because Whisper and the LLM are slower than the
  silence rule), else ``end_silence_ms`` (none will come: ``decline_p_end``).
- A turn whose onset → last speech is shorter than ``min_speech_ms`` ends with
  ``accepted=False``: it was a click or a cough, not something to transcribe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from voicepipe.core.turns.semantic import Eagerness, silence_needed_ms


@dataclass(frozen=True)
class EndpointConfig:
    threshold: float = 0.5
    neg_threshold: float = 0.35
    start_ms: int = 32
    min_speech_ms: int = 200
    end_silence_ms: int = 400
    max_utterance_ms: int = 20_000
    semantic: Eagerness | None = None  # None: silence alone ends a turn

    @classmethod
    def from_vad(cls, vad: Any, semantic: Eagerness | None = None) -> EndpointConfig:
        """From a ``voicepipe.config.VadConfig`` (and the ``[turns] eagerness`` policy)."""
        return cls(
            semantic=semantic,
            threshold=vad.threshold,
            # Silero's recommended hysteresis: 0.15 below the speech threshold.
            neg_threshold=max(0.01, vad.threshold - 0.15),
            start_ms=vad.start_ms,
            min_speech_ms=vad.min_speech_ms,
            end_silence_ms=vad.end_silence_ms,
            max_utterance_ms=round(vad.max_utterance_s * 1000),
        )


@dataclass(frozen=True)
class SpeechStarted:
    onset_media_ns: int  # start of the first speech chunk of the turn
    onset_wall_ns: int  # when that chunk's first sample arrived
    now_ns: int  # when the decision was made (arrival of the confirming chunk)


@dataclass(frozen=True)
class SpeechEnded:
    onset_media_ns: int
    onset_wall_ns: int
    last_speech_media_ns: int  # end of the last speech chunk
    last_speech_wall_ns: int  # when that sample arrived
    now_ns: int  # when the endpoint was decided
    reason: str  # "silence" | "max_length" | "flush"
    accepted: bool  # long enough to be a turn (min_speech_ms)

    @property
    def speech_ms(self) -> float:
        return (self.last_speech_media_ns - self.onset_media_ns) / 1e6


Event = SpeechStarted | SpeechEnded


class Endpointer:
    def __init__(self, cfg: EndpointConfig) -> None:
        if not 0.0 < cfg.neg_threshold <= cfg.threshold <= 1.0:
            raise ValueError("need 0 < neg_threshold <= threshold <= 1")
        self.cfg = cfg
        self.in_speech = False  # a turn is open (SpeechStarted sent, SpeechEnded not yet)
        self._speechy = False  # current hysteresis class of the signal
        self._run_start: tuple[int, int] | None = None  # (media, wall) of the candidate onset
        self._onset = (0, 0)
        self._last = (0, 0)  # (media, wall) end of the last speech chunk
        self._media_end = 0  # end of the last chunk seen
        self._p_end: tuple[int, float] | None = None  # (speech end it is for, P(end))
        self._expect: int | None = None  # the speech end an estimate is on its way for
        self._declined: int | None = None  # the speech end none will come for

    # Readable state for the caller (e.g. to start decoding during the trailing silence).
    @property
    def onset_media_ns(self) -> int:
        return self._onset[0]

    @property
    def last_speech_media_ns(self) -> int:
        return self._last[0]

    @property
    def trailing_silence_ns(self) -> int:
        """Media time since the last speech chunk of the open turn (0 outside a turn)."""
        return self._media_end - self._last[0] if self.in_speech else 0

    def set_p_end(self, p_end: float, last_speech_media_ns: int) -> None:
        """The LLM's P(end) for the words heard up to ``last_speech_media_ns``; it counts
        while that is still the open turn's last speech."""
        self._p_end = (last_speech_media_ns, p_end)

    def expect_p_end(self, last_speech_media_ns: int) -> None:
        """An estimate for the words up to ``last_speech_media_ns`` is on its way: until
        it comes (or that is no longer the last speech), wait as long as for unfinished
        words. Ignored once declined for that speech end."""
        if self._declined != last_speech_media_ns:
            self._expect = last_speech_media_ns

    def decline_p_end(self, last_speech_media_ns: int) -> None:
        """No estimate will come for that speech end: silence alone decides it."""
        self._declined = last_speech_media_ns
        if self._expect == last_speech_media_ns:
            self._expect = None

    @property
    def awaiting_p_end(self) -> bool:
        """An estimate is expected for the current speech end and not known yet."""
        return self.in_speech and self._expect == self._last[0] and self.p_end is None

    @property
    def p_end(self) -> float | None:
        """P(end) for the current speech end, if known."""
        got = self._p_end
        if got is None or not self.in_speech or got[0] != self._last[0]:
            return None
        return got[1]

    def silence_needed_ns(self) -> int:
        """The trailing silence that would end the open turn now."""
        sem = self.cfg.semantic
        if sem is None:
            return self.cfg.end_silence_ms * 1_000_000
        if self.awaiting_p_end:
            return sem.max_ms * 1_000_000
        return round(silence_needed_ms(self.p_end, sem) * 1_000_000)

    def update(
        self, prob: float, media_start_ns: int, media_end_ns: int, now_ns: int
    ) -> list[Event]:
        cfg = self.cfg
        if prob >= cfg.threshold:
            self._speechy = True
        elif prob < cfg.neg_threshold:
            self._speechy = False
        self._media_end = media_end_ns
        chunk_start_wall = now_ns - (media_end_ns - media_start_ns)
        events: list[Event] = []
        if not self.in_speech:
            if not self._speechy:
                self._run_start = None
                return events
            if self._run_start is None:
                self._run_start = (media_start_ns, chunk_start_wall)
            if media_end_ns - self._run_start[0] >= cfg.start_ms * 1_000_000:
                self.in_speech = True
                self._onset = self._run_start
                self._last = (media_end_ns, now_ns)
                self._run_start = None
                events.append(SpeechStarted(self._onset[0], self._onset[1], now_ns))
            return events
        if self._speechy:
            self._last = (media_end_ns, now_ns)
        if media_end_ns - self._last[0] >= self.silence_needed_ns():
            events.append(self._end(now_ns, "silence"))
        elif media_end_ns - self._onset[0] >= cfg.max_utterance_ms * 1_000_000:
            events.append(self._end(now_ns, "max_length"))
        return events

    @property
    def media_end_ns(self) -> int:
        """End of the last chunk seen."""
        return self._media_end

    def poll(self, now_ns: int) -> list[Event]:
        """The silence rule again on the audio seen so far, between chunks: an estimate that
        arrives after the trailing silence already reached what it asks for ends the turn
        now (reason "silence"), not with the next chunk (up to a VAD chunk later)."""
        if not self.in_speech or self._media_end - self._last[0] < self.silence_needed_ns():
            return []
        return [self._end(now_ns, "silence")]

    def flush(self, now_ns: int) -> list[Event]:
        """End of input: close the open turn, if any."""
        self._run_start = None
        return [self._end(now_ns, "flush")] if self.in_speech else []

    def _end(self, now_ns: int, reason: str) -> SpeechEnded:
        self.in_speech = False
        self._p_end = None
        self._expect = self._declined = None
        # After a max-length cut the speaker may still be talking: they must prove it with
        # start_ms of fresh speech before a new turn opens.
        self._speechy = False
        ev = SpeechEnded(
            onset_media_ns=self._onset[0],
            onset_wall_ns=self._onset[1],
            last_speech_media_ns=self._last[0],
            last_speech_wall_ns=self._last[1],
            now_ns=now_ns,
            reason=reason,
            accepted=self._last[0] - self._onset[0] >= self.cfg.min_speech_ms * 1_000_000,
        )
        return ev
