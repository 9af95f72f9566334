"""The teacher's own per-phoneme durations at inference (``[tts] durations = "teacher"``).

hibari predicts one duration per phoneme id in the tensor ``/Clip_output_0``, just
before its length regulator (nn/tts/hibari_teacher.py). The codec LM was trained on
exactly these durations; its own duration predictor (nn/tts/duration.py) imitates them,
and measured on the assistant's replies that imitation costs round-trip WER
(docs/BENCHMARKS.md, "the codec LM on the teacher's alignment"). Here only the part
of hibari's graph that computes them runs: the sub-graph from ``ids`` and ``speed``
to ``/Clip_output_0`` (text encoder and duration head, 764 of its 1,731 nodes):
a few ms for a sentence on one thread, a small share of hibari's whole synthesis
(timed once by a one-off script, not a bench). The phoneme ids are hibari's
already (``hibari_teacher.text_to_ids``).
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache

import numpy as np

from voicepipe.nn.tts.hibari_teacher import DUR_TENSOR, units


class TeacherDurations:
    """``durations(ids, pace)``: hibari's integer durations (25 ms units), one per id."""

    def __init__(self, voice: str = "heart") -> None:
        import onnx
        import onnxruntime as ort
        from hibari.voices import voice_path

        model = onnx.load(os.path.abspath(voice_path(voice)))
        sub = onnx.utils.Extractor(model).extract_model(["ids", "speed"], [DUR_TENSOR])
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.log_severity_level = 3
        self._sess = ort.InferenceSession(
            sub.SerializeToString(), so, providers=["CPUExecutionProvider"]
        )
        self._lock = threading.Lock()  # (one run at a time: sessions share this instance)

    def __call__(self, ids: list[int], pace: float = 1.0) -> list[int]:
        """pace > 1 speaks slower (as the duration predictor's ``pace``): hibari's
        ``speed`` is its inverse."""
        if pace <= 0:
            raise ValueError(f"pace must be positive, got {pace}")
        feeds = {
            "ids": np.asarray([ids], np.int64),
            "speed": np.asarray([1.0 / pace], np.float32),
        }
        with self._lock:
            (d,) = self._sess.run(None, feeds)
        return units(d)


@lru_cache(maxsize=2)
def teacher_durations(voice: str = "heart") -> TeacherDurations:
    """One per process and voice (the graph cut takes ~10 ms, the session ~0.1 s)."""
    return TeacherDurations(voice)
