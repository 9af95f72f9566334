"""Is a session's voice turn being heard or answered? (the /v1 API yields while it is)

From the user's first speech to their reply's end, a turn's work (the ASR's partials and
final, the streaming prefill, the reply) is what a listener waits for. Between the end of
speech and the final transcript there is no turn yet, so that gap is bounded: speech that
yields no transcript (a cough) stops counting after ``final_wait_ns``.
"""

from __future__ import annotations

from dataclasses import dataclass

FINAL_WAIT_NS = 1_500_000_000  # the ASR's final decode takes well under this


@dataclass
class VoiceActivity:
    final_wait_ns: int = FINAL_WAIT_NS
    hearing: bool = False  # speech started and not yet ended
    heard_end_ns: int = 0  # when speech ended with its final transcript still to come; 0: none

    def speech_started(self) -> None:
        self.hearing, self.heard_end_ns = True, 0

    def speech_ended(self, now_ns: int) -> None:
        self.hearing, self.heard_end_ns = False, now_ns

    def final_heard(self) -> None:
        """The final transcript (or an interruption) came: the turn, if any, is a reply's."""
        self.heard_end_ns = 0

    def active(self, now_ns: int, replies_in_flight: bool) -> bool:
        if replies_in_flight or self.hearing:
            return True
        return bool(self.heard_end_ns) and now_ns - self.heard_end_ns < self.final_wait_ns
