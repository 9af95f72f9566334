"""`voicepipe serve --pipeline text`: speech in, reply *text* out (no TTS).

The client's audio goes through VAD, endpointing and Whisper; each final
transcript goes to the speculative LLM, whose reply streams back as text
deltas and speakable chunks, with the ``llm.ttft`` / ``llm.first_chunk``
spans and the speculation metrics. For testing the LLM half of the assistant
without a voice; offline, ``voicepipe chat`` drives the same stage from a
keyboard.
"""

from __future__ import annotations

from voicepipe.config import Config
from voicepipe.pipelines import SessionInfo
from voicepipe.stage import Stage, TurnCounter


def build(cfg: Config, session: SessionInfo) -> list[Stage]:
    from voicepipe.stages.asr import AsrStage
    from voicepipe.stages.llm.stage import LlmStage
    from voicepipe.stages.turns import EndOfTurnBoard

    turns = TurnCounter()  # the user's turns and the assistant's alerts (timers) alike
    eot = EndOfTurnBoard()  # the LLM's P(end of turn) for the ASR's endpointer
    return [AsrStage(cfg, turns=turns, eot=eot), LlmStage(cfg, turns=turns, eot=eot)]


def preload(cfg: Config) -> None:
    """An OpenAI-compatible LLM backend must answer at start-up (the local models load
    with the first session, as before)."""
    if cfg.llm.backend != "local":
        from voicepipe.pipelines.assistant import check_llm_backend

        check_llm_backend(cfg)
