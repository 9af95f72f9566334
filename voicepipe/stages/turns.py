"""Turn-taking between ASR and LLM: barge-in.

The ASR stage gives every user turn a new id when speech starts. When that
happens while an older reply is still being generated or played, every later
stage must drop it at once: this stage turns ``SpeechStart(turn N)`` into an
``Interrupt(turn N)``, a system frame that jumps the queues downstream
(LLM → TTS → output pacer → client, whose playout flushes on the wire
``interrupt`` message). Stages keep work of turn N and newer, so the
interrupt is harmless when nothing older is in flight.

``EndOfTurnBoard`` (core/turns/semantic.py) is the other thing of turn-taking a pipeline
hands its stages: the LLM stage posts P(end of turn) on it, the ASR's endpointer reads it.
"""

from __future__ import annotations

from voicepipe.core.turns.semantic import EndOfTurnBoard
from voicepipe.frames import Frame, Interrupt, SessionSetup, SpeechStart
from voicepipe.stage import Stage

__all__ = ["BargeIn", "EndOfTurnBoard"]


class BargeIn(Stage):
    name = "turns"

    def __init__(self) -> None:
        super().__init__()
        self.enabled = True  # off: the endpoint decides (Realtime interrupt_response=false)

    async def process(self, frame: Frame) -> None:
        if isinstance(frame, SessionSetup) and frame.barge_in is not None:
            self.enabled = frame.barge_in
        if self.enabled and isinstance(frame, SpeechStart) and frame.turn_id > 0:
            await self.push(Interrupt(turn_id=frame.turn_id, reason="barge-in"))
        await self.push(frame)
