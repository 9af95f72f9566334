"""Preemptive generation: start, keep or drop a tentative reply. Sans-I/O.

The endpointer waits ``vad.end_silence_ms`` of silence before it declares the
turn over, and only then does the final transcript exist. Most of that wait
is dead time: once the user has been quiet for ``turns.preempt_after_ms`` the
ASR sends what it heard so far (``TranscriptStable``), and the LLM starts a
*tentative* reply on it. Nothing of a tentative reply reaches the TTS, the
client or the conversation memory until the final transcript arrives:

- final agrees with the stable text (same words after the WER normaliser:
  case, punctuation and number spelling do not matter) → **commit**: the held
  output is released at once and the reply goes on;
- final differs, the user speaks on (``SpeechResumed``), a newer stable text
  arrives, or a newer turn interrupts → **cancel**: the tentative reply and all
  it held are dropped; on a differing final the normal path answers the final.

``Preemption`` makes these decisions for one session and counts outcomes; the
LLM stage (voicepipe/stages/llm/stage.py) carries them out.
"""

from __future__ import annotations

from dataclasses import dataclass

from voicepipe.core.text.wer import normalize


def agrees(stable: str, final: str) -> bool:
    """Would a reply to ``stable`` be a reply to ``final``? Same words, both non-empty."""
    a = normalize(stable)
    return bool(a) and a == normalize(final)


@dataclass(frozen=True)
class Decision:
    cancel: int | None = None  # the turn whose tentative reply must be dropped
    start: str | None = None  # start a tentative reply on this text (for the event's turn)
    commit: bool = False  # the tentative reply of the event's turn is confirmed

    @property
    def noop(self) -> bool:
        return self.cancel is None and self.start is None and not self.commit


class Preemption:
    """At most one tentative reply per session: ``turn`` and the ``text`` it answers."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.turn: int | None = None
        self.text = ""
        self.kept = 0
        self.cancelled = 0

    def _drop(self) -> int | None:
        turn, self.turn, self.text = self.turn, None, ""
        if turn is not None:
            self.cancelled += 1
        return turn

    def on_stable(self, turn: int, text: str) -> Decision:
        if not self.enabled or not normalize(text):
            return Decision()
        if self.turn == turn and agrees(self.text, text):
            return Decision()  # already answering these words
        cancel = self._drop()
        self.turn, self.text = turn, text
        return Decision(cancel=cancel, start=text)

    def on_resumed(self, turn: int) -> Decision:
        if self.turn is not None and self.turn <= turn:
            return Decision(cancel=self._drop())
        return Decision()

    def on_final(self, turn: int, text: str) -> Decision:
        """Commit (keep the tentative reply), cancel it, or noop (no tentative: normal path)."""
        if self.turn is None:
            return Decision()
        if self.turn == turn and agrees(self.text, text):
            self.turn, self.text = None, ""
            self.kept += 1
            return Decision(commit=True)
        return Decision(cancel=self._drop())

    def on_cancel(self, turn: int) -> Decision:
        """Work of exactly ``turn`` is void."""
        if self.turn is not None and self.turn == turn:
            return Decision(cancel=self._drop())
        return Decision()

    def on_interrupt(self, turn: int) -> Decision:
        """Work of turns older than ``turn`` is void (barge-in)."""
        if self.turn is not None and self.turn < turn:
            return Decision(cancel=self._drop())
        return Decision()
