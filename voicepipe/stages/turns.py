"""Turn-taking between ASR and LLM: barge-in.

The ASR stage gives every user turn a new id when speech starts. When that
happens while an older reply is still being generated or played, every later
stage must drop it at once: this stage turns ``SpeechStart(turn N)`` into an
``Interrupt(turn N)``, a system frame that jumps the queues downstream
(LLM → TTS → output pacer → client, whose playout flushes on the wire
``interrupt`` message). Stages keep work of turn N and newer.
"""

from __future__ import annotations

from voicepipe.frames import Frame, Interrupt, ReplyEnd, SpeechStart, TextChunk
from voicepipe.stage import Stage


class BargeIn(Stage):
    name = "turns"

    def __init__(self) -> None:
        super().__init__(queue_size=64)
        self.replying_turn = 0  # newest turn whose reply may still be in flight
        self.interrupts = 0

    async def process(self, frame: Frame) -> None:
        if isinstance(frame, SpeechStart) and frame.turn_id > 0:
            if self.replying_turn and self.replying_turn < frame.turn_id:
                self.interrupts += 1
            # Always send it: it is harmless when nothing older is in flight, and the
            # LLM may already be working on a preemptive reply of an older turn.
            await self.push(Interrupt(turn_id=frame.turn_id, reason="barge-in"))
        elif isinstance(frame, TextChunk | ReplyEnd):
            self.replying_turn = max(self.replying_turn, frame.turn_id)
        await self.push(frame)
