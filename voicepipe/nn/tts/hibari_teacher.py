"""hibari (the teacher TTS) with its per-phoneme durations exposed.

hibari's ONNX graph predicts one duration per phoneme id (the two 0 pads
included) in the tensor ``/Clip_output_0`` just before its length regulator.
Appending that tensor to the graph outputs gives the teacher's own alignment
for free: durations are in 25 ms units and ``sum(durations) * 600`` equals the
number of 24 kHz samples it synthesizes. The codec LM is trained on that
alignment (docs/DESIGN.md §7).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

SAMPLE_RATE = 24000
SAMPLES_PER_UNIT = 600  # one duration unit = 25 ms at 24 kHz
DUR_TENSOR = "/Clip_output_0"


def units(durations: object) -> list[int]:
    """``DUR_TENSOR``'s float output as integer 25 ms units, one per phoneme id."""
    return [int(round(float(d))) for d in np.asarray(durations).reshape(-1)]


@dataclass(frozen=True)
class TeacherUtterance:
    ids: list[int]  # phoneme ids incl. the leading/trailing 0 pad
    durations: list[int]  # 25 ms units per id
    wave: np.ndarray  # float32, 24 kHz

    @property
    def n_samples(self) -> int:
        return int(self.wave.shape[0])


@lru_cache(maxsize=1)
def _augmented_model_bytes(path: str) -> bytes:
    import onnx

    model = onnx.load(path)
    model.graph.output.append(
        onnx.helper.make_tensor_value_info(DUR_TENSOR, onnx.TensorProto.FLOAT, None)
    )
    return model.SerializeToString()


class HibariTeacher:
    """Synthesizes text with hibari and returns the phoneme ids and durations it used.

    One sentence at a time (hibari splits text into sentences; we keep one id
    sequence per utterance so durations line up with the audio)."""

    def __init__(self, voice: str = "heart", threads: int = 1) -> None:
        import onnxruntime as ort
        from hibari import Hibari
        from hibari.voices import voice_path

        self.hibari = Hibari(voice=voice, threads=threads)
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = threads
        so.log_severity_level = 3
        data = _augmented_model_bytes(os.path.abspath(voice_path(voice)))
        self.sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        self.vocab: dict[str, int] = self.hibari.vocab

    def phoneme_ids(self, text: str) -> list[int]:
        """All sentences' phonemes joined with a space into one id sequence (with the 0 pads)."""
        chunks = self.hibari.phonemize(text)
        return self.hibari.ids(" ".join(chunks))

    def synthesize_ids(self, ids: list[int], seed: int = 0) -> TeacherUtterance:
        from hibari import dsp

        if len(ids) < 3:
            return TeacherUtterance(list(ids), [0] * len(ids), np.zeros(0, np.float32))
        feeds = {"ids": np.asarray([ids], np.int64), "speed": np.asarray([1.0], np.float32)}
        *spec, dur = self.sess.run(None, feeds)
        lh, th, ln, lr, phi, f0 = (o[0] for o in spec)
        wave = dsp.synth(lh, th, ln, lr, phi, f0, np.random.default_rng(seed))
        durations = units(dur)
        return TeacherUtterance(list(ids), durations, wave.astype(np.float32))

    def synthesize(self, text: str, seed: int = 0) -> TeacherUtterance:
        return self.synthesize_ids(self.phoneme_ids(text), seed)


@lru_cache(maxsize=1)
def vocab() -> dict[str, int]:
    """hibari's phoneme alphabet (symbol → id); id 0 is the pad."""
    import json

    import hibari

    path = os.path.join(os.path.dirname(hibari.__file__), "assets", "vocab.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def n_phoneme_ids() -> int:
    return max(vocab().values()) + 1


class _Front:
    """hibari's sentence splitter + G2P without its ONNX session (what Hibari.phonemize needs)."""

    def __init__(self) -> None:
        from hibari import Hibari
        from hibari.g2p import G2P

        self.g2p = G2P(british=False)
        self.split_sentences = Hibari.split_sentences
        self._phonemize = Hibari.phonemize

    def ids(self, text: str) -> list[int]:
        chunks = self._phonemize(self, text)
        v = vocab()
        return [0, *[v[c] for c in " ".join(chunks) if c in v], 0]


@lru_cache(maxsize=1)
def _front() -> _Front:
    return _Front()


def text_to_ids(text: str) -> list[int]:
    """The same phoneme ids the teacher uses for ``text`` (G2P only, no synthesis)."""
    return _front().ids(text)
