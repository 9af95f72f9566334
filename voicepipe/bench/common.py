"""What several ``bench`` commands share: the spoken questions and their voice, the
percentiles every latency figure is given in, and the machine a run was on.

Public, so that a bench module never imports another command's private helpers (and
two commands never import each other: tests/test_imports.py).
"""

from __future__ import annotations

import os
from typing import Any

# The questions bench e2e (and hostile, soak, e2e --ray) speak, one per session.
QUESTIONS = [
    "What is the capital of France?",
    "How many days are there in a week?",
    "Can you tell me a fun fact about the moon?",
    "What should I cook for dinner tonight?",
    "Why is the sky blue?",
    "How do I make a cup of tea?",
    "What is two plus three?",
    "Give me a tip for sleeping better.",
]

# The relaxation betas the TTS benches sweep (bench tts, bench tts --set replies).
TTS_BETAS = (0.0, 0.1, 0.2, 0.3, 0.5)


def speak(texts: list[str], rate: int = 16000) -> list[Any]:
    """``texts`` spoken by the teacher voice (hibari) at ``rate``, each after a quarter
    second of silence (a mic hears a little before speech)."""
    import numpy as np
    from hibari.tts import Hibari

    from voicepipe.audio import resample

    tts = Hibari()
    lead = np.zeros(rate // 4, np.float32)
    return [
        np.concatenate([lead, resample(np.asarray(tts(t, seed=i), np.float32), 24000, rate)])
        for i, t in enumerate(texts)
    ]


def pcts(values: list[float]) -> dict[str, float]:
    """p50, p95 and p99 of ``values`` (empty: none)."""
    from voicepipe.tracing import percentile

    if not values:
        return {}
    return {q: round(percentile(values, p), 1) for q, p in (("p50", 50), ("p95", 95), ("p99", 99))}


def cpu() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it (empty where there is none)."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def load_avg() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages (others' work on a shared box)."""
    return [round(x, 2) for x in os.getloadavg()]
