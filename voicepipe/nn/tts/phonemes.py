"""Explicit alignment: which phoneme each 46.4 ms codec frame speaks.

The codec LM does not learn alignment (docs/DESIGN.md §7: it did not emerge from a
phoneme prefix); it is told, per frame, the phoneme under the frame's centre,
the phonemes under the next ``LOOKAHEAD`` frames, and where in the phoneme
the frame sits. Durations come from the teacher (training) or the duration
predictor (inference), in hibari's 25 ms units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CODEC_RATE = 22050
FRAME_SAMPLES = 1024  # 4 mel frames × hop 256 at 22,050 Hz = one codec frame
UNIT_S = 0.025  # hibari duration unit
LOOKAHEAD = 3  # frames of future phonemes the LM sees
N_PROGRESS = 8  # buckets of position-within-phoneme
N_DURBUCKET = 16  # phoneme length in frames, capped


@dataclass(frozen=True)
class FrameAlign:
    index: np.ndarray  # (T,) int64 phoneme index (into the id sequence) at frame t
    ahead: np.ndarray  # (T, LOOKAHEAD) int64 phoneme index at frames t+1 … t+LOOKAHEAD
    progress: np.ndarray  # (T,) int64 0..N_PROGRESS-1
    dur_bucket: np.ndarray  # (T,) int64 0..N_DURBUCKET-1

    @property
    def n_frames(self) -> int:
        return int(self.index.shape[0])


def frame_seconds() -> float:
    return FRAME_SAMPLES / CODEC_RATE


def n_frames_for(durations: np.ndarray | list[int]) -> int:
    """Codec frames covering the teacher's audio for these durations (MelVQ: ceil(N / 1024))."""
    n24 = int(np.sum(durations)) * 600
    n22 = int(round(n24 * CODEC_RATE / 24000))
    return max(1, -(-n22 // FRAME_SAMPLES))


def align(durations: np.ndarray | list[int], n_frames: int | None = None) -> FrameAlign:
    """Per-frame phoneme index by the frame's centre time; frames past the end keep the last."""
    d = np.asarray(durations, dtype=np.float64) * UNIT_S
    ends = np.cumsum(d)
    starts = ends - d
    t_total = n_frames if n_frames is not None else n_frames_for(durations)
    fs = frame_seconds()
    n_ph = d.shape[0]

    def idx_at(frame: np.ndarray) -> np.ndarray:
        centre = (frame + 0.5) * fs
        return np.minimum(np.searchsorted(ends, centre, side="right"), n_ph - 1)

    frames = np.arange(t_total)
    index = idx_at(frames)
    ahead = np.stack([idx_at(frames + k) for k in range(1, LOOKAHEAD + 1)], axis=1)
    centre = (frames + 0.5) * fs
    span = np.maximum(d[index], 1e-6)
    frac = np.clip((centre - starts[index]) / span, 0.0, 0.999)
    progress = (frac * N_PROGRESS).astype(np.int64)
    dur_bucket = np.minimum(np.round(d[index] / fs), N_DURBUCKET - 1).astype(np.int64)
    return FrameAlign(index.astype(np.int64), ahead.astype(np.int64), progress, dur_bucket)
