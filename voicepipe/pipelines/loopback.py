"""Loopback: the client's own audio comes back, paced like a reply (audio in → pacing → out).

It exercises everything but the models: input resampling, the session, the
output pacer (resampling to the session's output rate, 20 ms frames, lead),
the wire format and the client's playout. The whole stream is one reply of
turn 1, which ends when the client sends ``end``; after a client ``interrupt``
the echo goes on as a new reply (the turn the server stamps on the input). Spans: ``loopback.echo``
(arrival of the first input frame → its echo handed to the pacer) and
``loopback.stream`` (first → last input frame).
"""

from __future__ import annotations

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.frames import AudioIn, Frame, InputEnd, ReplyAudio, ReplyEnd, SpanFrame
from voicepipe.pipelines import SessionInfo
from voicepipe.stage import Stage
from voicepipe.stages.output import OutputStage

TURN = 1


class Echo(Stage):
    name = "loopback"

    def __init__(self) -> None:
        super().__init__(queue_size=32)
        self.first_ns: int | None = None
        self.last_ns = 0
        self.samples = 0

    async def process(self, frame: Frame) -> None:
        if isinstance(frame, AudioIn):
            if self.first_ns is None:
                self.first_ns = frame.t_ns
                await self.push(
                    SpanFrame(
                        turn_id=TURN,
                        name="loopback.echo",
                        start_ns=frame.t_ns,
                        end_ns=now_ns(),
                        attrs={"media_ms": frame.media_ns / 1e6},
                    )
                )
            self.last_ns = frame.t_ns
            self.samples += len(frame.pcm)
            await self.push(
                ReplyAudio(
                    turn_id=max(TURN, frame.turn_id), pcm=frame.pcm, sample_rate=frame.sample_rate
                )
            )
        elif isinstance(frame, InputEnd):
            if self.first_ns is not None:
                await self.push(
                    SpanFrame(
                        turn_id=TURN,
                        name="loopback.stream",
                        start_ns=self.first_ns,
                        end_ns=self.last_ns,
                        attrs={"samples": self.samples},
                    )
                )
            await self.push(ReplyEnd(turn_id=max(TURN, frame.turn_id)))
            await self.push(frame)
        else:
            await self.push(frame)


def build(cfg: Config, session: SessionInfo) -> list[Stage]:
    return [Echo(), OutputStage(cfg, session)]
