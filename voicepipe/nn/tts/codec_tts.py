"""Codec-LM TTS inference: text → phonemes → durations → aligned frames → codes → audio.

``CodecLMTTS`` runs speculative decoding of the codec LM (``spec.loop`` over the
target and proposer of nn/tts/codec_lm_decode.py, with the acceptance rule and K of
the ``[tts]`` config) and streams the codes through the
MelVQ codec's exact streaming vocoder. ``CodecLMTTS.shared(cfg)`` gives each
session its own TTS over one process-wide copy of the weights.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from voicepipe.config import TtsConfig
from voicepipe.core.text.split import Unsplittable, split_to_fit
from voicepipe.nn.threads import BUDGET
from voicepipe.nn.tts.codec_lm_decode import (  # noqa: F401 - re-exported for callers
    CodecLMProposer,
    CodecLMTarget,
    TTSModels,
    conditioning,
    load_models,
    load_training_checkpoints,
    plan,
)
from voicepipe.nn.tts.codec_synthesis import Synthesis, code_blocks, lm_steps
from voicepipe.nn.tts.phonemes import FrameAlign, frame_seconds
from voicepipe.speculative import rules
from voicepipe.speculative.rules import Rule
from voicepipe.speculative.sampling import SamplingParams

if TYPE_CHECKING:
    from voicepipe.nn.tts.codec import MelVQCodec

# [tts] durations: the codec LM's duration predictor, or hibari's own durations.
DURATION_SOURCES = ("predicted", "teacher")
_SHARED: dict[tuple, tuple[TTSModels, MelVQCodec]] = {}
_SHARED_LOCK = threading.Lock()
_WARMED: set[tuple] = set()  # (codec, push sizes) whose vocoder shapes ran once


# -- synthesis ----------------------------------------------------------------------------
# Synthesis reads [tts] (voicepipe.config.TtsConfig) itself: rule (greedy | exact | relaxed |
# topk | acoustic, or "ar": no speculation), beta, top_k, spec_k, adaptive_k, temperature, seed.


@dataclass
class SynthResult:
    audio: np.ndarray  # float32 at 22,050 Hz
    codes: np.ndarray  # (T, Q)
    stats: dict
    ttfa_s: float  # call → first audio sample out of the codec decoder
    wall_s: float
    lm_s: float  # G2P, durations and codec-LM decoding (target + draft)

    @property
    def audio_s(self) -> float:
        return len(self.audio) / 22050

    @property
    def rtf(self) -> float:
        return self.wall_s / max(self.audio_s, 1e-9)


class CodecLMTTS:
    """Text → audio with the codec LM, streamed: codes → mel → streaming HiFi-GAN.

    ``first_frames`` codec frames are decoded before the first vocoder call (small,
    for time-to-first-audio), then ``chunk_frames`` at a time (larger, so the
    vocoder's re-synthesized left context costs less per second of audio)."""

    def __init__(
        self,
        models: TTSModels,
        codec,
        *,
        chunk_frames: int = 8,
        first_frames: int = 4,
        threads: int = 2,
        lm_threads: int = 1,
        durations: str = "predicted",
    ) -> None:
        if durations not in DURATION_SOURCES:
            raise ValueError(
                f"tts.durations: {durations!r} is not one of {', '.join(DURATION_SOURCES)}"
            )
        self.m = models
        self.codec = codec  # voicepipe.nn.tts.codec.MelVQCodec (its vocoder decodes)
        self.chunk_frames = chunk_frames
        self.first_frames = first_frames
        # HiFi-GAN's convs scale to 2 threads (see ``threads``); the LM's ops are tiny (d=256),
        # and with OMP_WAIT_POLICY=PASSIVE (set by the CLI) every parallel region wakes a
        # sleeping thread, so the LM is faster on 1 (LM RTF 0.040 vs 0.047, BENCHMARKS.md).
        # The count is set on the calling thread before each LM step and vocoder push:
        # a stage advances the generator from whichever worker thread is free.
        self.threads = threads
        self.lm_threads = lm_threads
        # Where the alignment comes from when the caller gives none: the codec LM's own
        # duration predictor, or the teacher's durations (nn/tts/teacher_durations.py).
        self.durations = durations

    @property
    def threads(self) -> int:
        """Torch threads of a vocoder push (at most the vocoder's ``max_threads``: the
        iSTFT vocoder's small matrices run faster on one: decoder RTF 0.0092 vs 0.0116 on
        two, `bench codec`, docs/BENCHMARKS.md)."""
        return self._threads

    @threads.setter
    def threads(self, n: int) -> None:
        voc = getattr(self.codec, "vocoder", None)
        self._threads = min(n, getattr(voc, "max_threads", n))

    @classmethod
    def from_config(
        cls, cfg, models_path: str | Path | None = None, models: TTSModels | None = None
    ) -> CodecLMTTS:
        """A TTS with its own freshly loaded weights (benches, one-off commands);
        sessions use ``shared(cfg)``."""
        from voicepipe import registry
        from voicepipe.nn.tts.codec import MelVQCodec

        if models is None:
            models = load_models(models_path or registry.resolve("codec-lm-hibari"))
        codec = MelVQCodec.load(cfg.codec.model, q=cfg.codec.q, vocoder_name=cfg.codec.vocoder)
        return cls(models, codec, chunk_frames=cfg.codec.chunk_frames, durations=cfg.tts.durations)

    @classmethod
    def shared(cls, cfg, models_path: str | Path | None = None) -> CodecLMTTS:
        """A per-session TTS over process-wide shared weights (codec LM, draft, duration
        predictor, codebooks, vocoder and its prepacked streaming plan). Cheap after the
        first call: a session's state is only its per-utterance KV caches and stream."""
        from voicepipe import registry
        from voicepipe.nn.tts.codec import MelVQCodec
        from voicepipe.nn.vocoder.hifigan_stream import plan_for

        path = str(models_path or registry.resolve("codec-lm-hibari"))
        key = (path, cfg.codec.model, cfg.codec.q, cfg.codec.vocoder)
        with _SHARED_LOCK:
            if key not in _SHARED:
                models = load_models(path)
                codec = MelVQCodec.load(
                    cfg.codec.model, q=cfg.codec.q, vocoder_name=cfg.codec.vocoder
                )
                if getattr(codec.vocoder, "fast", False):
                    plan_for(codec.vocoder.model)  # prepack once, not in a session's turn
                _SHARED[key] = (models, codec)
            models, codec = _SHARED[key]
        return cls(models, codec, chunk_frames=cfg.codec.chunk_frames, durations=cfg.tts.durations)

    def distance(self) -> np.ndarray:
        """(V, V) level-0 code distances over their mean pairwise distance (unitless β).

        In the codec's own unit (RMS nepers per mel bin) nearest neighbours lie
        0.5–0.8 apart and the mean pair 2.2 apart, so a β sweep of 0…0.5 in raw
        units would accept almost nothing; normalised, β = 0.3 reaches about the
        median nearest neighbour."""
        return self.codec.normalized_distance_matrix(0)

    def rule(self, tts: TtsConfig) -> Rule:
        """The acceptance rule of ``tts`` (plain decoding, "ar": the one that keeps the
        target's distribution)."""
        sampling = SamplingParams(temperature=tts.temperature, seed=tts.seed)
        if tts.rule == "ar":
            return rules.for_sampling(sampling)
        distance = self.distance() if tts.rule == "acoustic" else None
        return rules.from_config(
            tts.rule, beta=tts.beta, top_k=tts.top_k, sampling=sampling, distance=distance
        )

    def codes(
        self,
        text: str,
        tts: TtsConfig,
        stats: dict | None = None,
        durations: list[int] | None = None,
        pace: float = 1.0,
    ):
        """Yield (N, Q) code blocks for ``text`` (speculative, or plain per rule "ar").

        A text whose plan exceeds the codec LM's ``max_frames`` is spoken as several
        passes over pieces cut at sentence, then clause, then word boundaries
        (core/text/split.py); the blocks follow each other as one utterance."""
        return code_blocks(lm_steps(self, text, tts, stats, durations, pace))

    @property
    def max_frames(self) -> int:
        """Codec frames one pass can decode (the RoPE table and KV cache of both models)."""
        return min(self.m.target.args.max_frames, self.m.draft.args.max_frames)

    def plans(
        self, text: str, durations: list[int] | None = None, pace: float = 1.0
    ) -> list[tuple[str, list[int], FrameAlign]]:
        """(text, phoneme ids, frame alignment) of each pass that speaks ``text``: one if its
        plan fits ``max_frames``, else one per piece of ``split_to_fit``. Given
        ``durations`` (e.g. the teacher's) belong to the whole text and cannot be cut,
        so a text too long for them raises ValueError; so does a single word too long."""
        from voicepipe.nn.tts.hibari_teacher import text_to_ids

        limit = self.max_frames
        if durations is not None:
            ids = text_to_ids(text)
            if len(ids) < 3:
                return []
            durations, al = plan(self.m, ids, durations, pace)
            if al.n_frames > limit:
                raise ValueError(
                    f"{al.n_frames} codec frames planned by the given durations, more than "
                    f"the codec LM's max_frames ({limit}); durations cannot be split"
                )
            return [(text, ids, al)]
        planned: dict[str, tuple[str, list[int], FrameAlign] | None] = {}
        teacher = None
        if self.durations == "teacher":
            from voicepipe.nn.tts.teacher_durations import teacher_durations

            teacher = teacher_durations()

        def frames(piece: str) -> int:
            ids = text_to_ids(piece)
            if len(ids) < 3:  # nothing to speak (as for a whole text)
                planned[piece] = None
                return 0
            given = None if teacher is None else teacher(ids, pace)
            al = plan(self.m, ids, given, pace)[1]
            planned[piece] = (piece, ids, al)
            return al.n_frames

        try:
            pieces = split_to_fit(text, frames, limit)
        except Unsplittable as e:
            raise ValueError(
                f"{e}: it plans more than the codec LM's max_frames ({limit} codec frames, "
                f"{limit * frame_seconds():.1f} s)"
            ) from e
        return [p for p in (planned[x] for x in pieces) if p is not None]

    def stream(
        self,
        text: str,
        tts: TtsConfig,
        stats: dict | None = None,
        durations: list[int] | None = None,
        pace: float = 1.0,
    ):
        """Yield float32 22,050 Hz audio chunks as soon as the vocoder has them."""
        with BUDGET.busy():  # (voicepipe/nn/threads.py: other calls' thread counts)
            yield from self._stream(text, tts, stats, durations, pace)

    def _stream(
        self,
        text: str,
        tts: TtsConfig,
        stats: dict | None,
        durations: list[int] | None,
        pace: float,
    ):
        syn = Synthesis(self, text, tts, stats, durations, pace)
        lm_s, t0 = 0.0, _now()
        try:
            while not syn.done:
                t_lm = _now()
                # The thread count is set on the calling thread before each LM step and
                # vocoder push: a stage advances the generator from whichever worker
                # thread is free (voicepipe/nn/threads.py).
                with BUDGET.claim(self.lm_threads) as n:
                    torch.set_num_threads(n)
                    syn.run_lm()
                lm_s += _now() - t_lm
                with BUDGET.claim(self.threads) as n:
                    torch.set_num_threads(n)
                    waves = syn.push()
                yield from waves
        finally:
            syn.close()
        if stats is not None:
            stats["lm_s"] = lm_s
            stats["wall_s"] = _now() - t0

    def warm_up(self) -> None:
        """Run every vocoder input width a stream uses once (first chunk, chunk, tail
        pieces, flush), then synthesize a short word (LM warm-up), so a session's first
        reply doesn't pay oneDNN's primitive creation. The primitive cache is per process
        and a TTS instance holds no state of its own (its caches are per utterance): once
        is enough for all sessions sharing this codec, and later calls return at once.
        (They used to synthesize the word again, ~0.5 s of CPU per session start that a
        burst of clients saying hello made every live session's reply wait for; a fresh
        instance's first reply measured no faster for it: docs/BENCHMARKS.md, "hostile".)"""
        top = max(self.first_frames, self.chunk_frames)
        sizes = (
            self.first_frames,
            self.chunk_frames,
            *(1 << b for b in range(top.bit_length()) if 1 << b < top),
        )
        with _SHARED_LOCK:
            todo = (id(self.codec), sizes) not in _WARMED
            _WARMED.add((id(self.codec), sizes))
        if not todo:
            return
        torch.set_num_threads(self.threads)
        dec = self.codec.stream_decoder()
        z = np.zeros((1, self.codec.q), np.int64)
        for n in sizes:
            dec.push(np.repeat(z, n, 0))
        dec.flush()
        for _ in self.stream("Okay.", TtsConfig()):
            pass

    def synth(
        self, text: str, tts: TtsConfig, durations: list[int] | None = None, pace: float = 1.0
    ) -> SynthResult:
        stats: dict = {}
        t0 = _now()
        chunks, ttfa = [], None
        for c in self.stream(text, tts, stats, durations, pace):
            if ttfa is None:
                ttfa = _now() - t0
            chunks.append(c)
        wall = _now() - t0
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        return SynthResult(
            audio, np.zeros((0, 0), np.int64), stats, ttfa or wall, wall, stats.get("lm_s", 0.0)
        )

    def decode_codes(
        self, text: str, tts: TtsConfig, durations: list[int] | None = None, pace: float = 1.0
    ) -> tuple[np.ndarray, dict, float]:
        """Codes only (no vocoder): (T, Q) codes, stats, LM seconds — for speed sweeps."""
        torch.set_num_threads(self.lm_threads)
        stats: dict = {}
        t0 = _now()
        blocks, n = [], 0
        for b in self.codes(text, tts, stats, durations, pace):
            blocks.append(b)
            n += len(b)
            if n >= self.first_frames and "first_s" not in stats:
                stats["first_s"] = _now() - t0  # LM share of time-to-first-audio
        lm_s = _now() - t0
        q = self.m.target.args.n_q
        codes = np.concatenate(blocks) if blocks else np.zeros((0, q), np.int64)
        return codes, stats, lm_s


def _now() -> float:
    import time

    return time.perf_counter()
