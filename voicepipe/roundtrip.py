"""Offline transcription with the default ASR, for round-trip (intelligibility) WER.

Used by the codec and TTS benchmarks and by tests: synthesize → transcribe →
compare with the text. Not the streaming path (see ``voicepipe.stages.asr``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from voicepipe.audio import resample


@lru_cache(maxsize=2)
def _model(name: str, threads: int):
    from faster_whisper import WhisperModel

    from voicepipe import registry

    return WhisperModel(
        str(registry.resolve(name)), device="cpu", compute_type="int8", cpu_threads=threads
    )


def transcribe(
    pcm: np.ndarray, sample_rate: int, *, model: str = "whisper-tiny.en", threads: int = 2
) -> str:
    audio = resample(np.asarray(pcm, dtype=np.float32), sample_rate, 16000)
    segments, _ = _model(model, threads).transcribe(
        audio, beam_size=1, language="en", condition_on_previous_text=False, vad_filter=False
    )
    return " ".join(s.text.strip() for s in segments).strip()
