"""`voicepipe serve --pipeline asr`: speech recognition only.

The client's audio goes through VAD, endpointing and Whisper; what comes back
is transcript events (partials while the user speaks, a final per turn) and
the ``vad.speech`` / ``asr.final`` spans. No reply is produced.
"""

from __future__ import annotations

from voicepipe.config import Config
from voicepipe.pipelines import SessionInfo
from voicepipe.stage import Stage


def build(cfg: Config, session: SessionInfo) -> list[Stage]:
    from voicepipe.stages.asr import AsrStage

    if session.asr_sample_rate != cfg.audio.asr_sample_rate:  # pragma: no cover - defensive
        raise ValueError("the session's ASR rate differs from the config's")
    return [AsrStage(cfg)]
