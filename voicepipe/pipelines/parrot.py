"""Parrot: record the client's audio, and when the client says ``end``, play it back.

Like ``loopback`` but turn-shaped, as a real assistant is: the reply only
starts after the user has finished. The end of input stands in for the end
of speech (no VAD), and is announced as a final (empty) transcript with its
media time, so ``e2e.voice_to_voice`` can be measured end to end — by the
client, and by the server from the client's playback reports.
"""

from __future__ import annotations

import numpy as np

from voicepipe.config import Config
from voicepipe.frames import AudioIn, Frame, InputEnd, ReplyAudio, ReplyEnd, TranscriptFinal
from voicepipe.pipelines import SessionInfo
from voicepipe.stage import Stage
from voicepipe.stages.output import OutputStage

TURN = 1
CHUNK_S = 0.2  # replay in chunks, as a TTS would stream


class Parrot(Stage):
    name = "parrot"

    def __init__(self) -> None:
        super().__init__(queue_size=32)
        self.parts: list[np.ndarray] = []
        self.rate = 0
        self.end_media_ns = 0
        self.end_wall_ns = 0

    async def process(self, frame: Frame) -> None:
        if isinstance(frame, AudioIn):
            self.parts.append(frame.pcm)
            self.rate = frame.sample_rate
            self.end_media_ns = frame.media_ns + len(frame.pcm) * 1_000_000_000 // self.rate
            self.end_wall_ns = frame.t_ns
        elif isinstance(frame, InputEnd):
            await self.push(
                TranscriptFinal(
                    turn_id=TURN,
                    text="",
                    speech_end_media_ns=self.end_media_ns,
                    speech_end_wall_ns=self.end_wall_ns,
                )
            )
            if self.parts:
                pcm = np.concatenate(self.parts)
                step = max(1, round(CHUNK_S * self.rate))
                for i in range(0, len(pcm), step):
                    await self.push(
                        ReplyAudio(turn_id=TURN, pcm=pcm[i : i + step], sample_rate=self.rate)
                    )
            await self.push(ReplyEnd(turn_id=TURN))
            await self.push(frame)
        else:
            await self.push(frame)


def build(cfg: Config, session: SessionInfo) -> list[Stage]:
    return [Parrot(), OutputStage(cfg, session)]
