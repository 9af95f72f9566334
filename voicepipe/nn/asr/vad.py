"""Streaming Silero VAD (the v6 ONNX faster-whisper ships), recurrent state carried across chunks.

The graph (faster_whisper/assets/silero_vad_v6.onnx) at 16 kHz:

    input  (S, 576) float32   S chunks, each 64 samples of left context + 512 new samples
    h, c   (1, 1, 128)        LSTM state; the S chunks run through the LSTM in order
    → speech_probs (S,), hn, cn

So one chunk is 512 samples = 32 ms, and the 64-sample context is the tail of
the previous chunk. ``SileroVad.feed`` accepts audio of any length, buffers
the remainder, and returns one probability per completed chunk; feeding a
stream in pieces gives the same probabilities as feeding it at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

SAMPLE_RATE = 16000
CHUNK = 512  # samples per probability at 16 kHz (32 ms)
CONTEXT = 64  # samples of the previous chunk the model sees in front of each chunk
STATE = 128


def default_model_path() -> Path:
    import faster_whisper

    return Path(faster_whisper.__file__).resolve().parent / "assets" / "silero_vad_v6.onnx"


class SileroVad:
    """One stream's VAD. Not thread-safe; make one per stream (the ONNX session is shared)."""

    _sessions: dict[tuple[str, int], Any] = {}  # onnxruntime sessions (no type stubs)

    def __init__(self, path: str | Path | None = None, threads: int = 1) -> None:
        self.path = str(path or default_model_path())
        if not Path(self.path).is_file():
            raise FileNotFoundError(
                f"Silero VAD model not found at {self.path}; reinstall faster-whisper "
                "(pip install --force-reinstall --no-deps faster-whisper)"
            )
        key = (self.path, threads)
        if key not in self._sessions:
            import onnxruntime as ort

            so = ort.SessionOptions()
            # One thread: a 32 ms chunk costs well under a millisecond; more threads only
            # contend with the Whisper decoder for the two cores.
            so.intra_op_num_threads = so.inter_op_num_threads = threads
            so.log_severity_level = 3
            self._sessions[key] = ort.InferenceSession(
                self.path, so, providers=["CPUExecutionProvider"]
            )
        self.session = self._sessions[key]
        self.reset()

    def reset(self) -> None:
        self._h = np.zeros((1, 1, STATE), np.float32)
        self._c = np.zeros((1, 1, STATE), np.float32)
        self._context = np.zeros(CONTEXT, np.float32)
        self._pending = np.zeros(0, np.float32)
        self.samples_in = 0  # samples fed so far (chunk k covers [k*CHUNK, (k+1)*CHUNK))

    @property
    def chunks_done(self) -> int:
        return (self.samples_in - len(self._pending)) // CHUNK

    def feed(self, pcm: np.ndarray) -> np.ndarray:
        """Speech probability of each 512-sample chunk completed by ``pcm`` (16 kHz float32)."""
        pcm = np.asarray(pcm, dtype=np.float32).reshape(-1)
        self.samples_in += len(pcm)
        buf = np.concatenate([self._pending, pcm]) if len(self._pending) else pcm
        n = len(buf) // CHUNK
        self._pending = buf[n * CHUNK :].copy()
        if n == 0:
            return np.zeros(0, np.float32)
        chunks = buf[: n * CHUNK].reshape(n, CHUNK)  # (S, 512)
        prev_tails = np.concatenate([self._context[None], chunks[:-1, -CONTEXT:]])  # (S, 64)
        x = np.ascontiguousarray(np.concatenate([prev_tails, chunks], axis=1))  # (S, 576)
        probs, self._h, self._c = self.session.run(None, {"input": x, "h": self._h, "c": self._c})
        self._context = chunks[-1, -CONTEXT:].copy()
        return np.asarray(probs, dtype=np.float32).reshape(n)
