"""TTS stage: TextChunk → ReplyAudio as soon as the first codec frame decodes.

Backends (``tts.backend``) are synchronous generators of float32 audio chunks;
the stage pulls one chunk at a time in a worker thread (or, codec-lm with
``tts.batching``, from the process's TTS batcher, schedulers/tts_batch.py, which
speaks every session's text on shared workers), so an ``Interrupt`` (which
cancels the in-flight ``process``) stops synthesis at the next chunk boundary
and nothing of the old turn is pushed after it.

- ``codec-lm``: the project's codec LM with speculative decoding, streamed
  frame by frame into the MelVQ codec's streaming decoder (nn/tts/codec_tts.py).
- ``hibari``: the teacher TTS as a baseline, one chunk per sentence.

Text front-end (``tts.normalize``, core/text/norm.py): both backends speak the
chunk's text with numbers, dates, symbols, list markers and the like written
out as words; the stage keeps the original text for ``ReplyEnd`` and the
barge-in bookkeeping, which weighs each original word by how long its spoken
form is ("1969" takes as long as "nineteen sixty-nine").

Span ``tts.ttfa``: from the moment the stage starts on a text chunk to the
first audio sample out of the codec decoder (the first non-empty chunk).

Barge-in bookkeeping: the stage remembers how much audio each text chunk
became; when the client's final playback report for a reply shows it was cut
short, it sends ``ReplyHeard`` upstream so the LLM keeps only the words that
were played (``core/turns/heard.py``). A chunk the backend fails on is skipped with
a non-fatal error event; the reply and the session go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Hashable, Iterator
from typing import Protocol

import numpy as np

from voicepipe.clock import now_ns
from voicepipe.config import Config, TtsConfig
from voicepipe.core.playout.lead_trim import LeadTrim
from voicepipe.core.playout.tail_trim import TailTrim, ends_sentence
from voicepipe.core.text import norm as textnorm
from voicepipe.core.turns.heard import SpokenReply
from voicepipe.frames import (
    ErrorFrame,
    Frame,
    PlaybackReport,
    ReplyAudio,
    ReplyEnd,
    ReplyHeard,
    SpanFrame,
    SystemFrame,
    TextChunk,
)
from voicepipe.schedulers.jobs import DONE, Job
from voicepipe.stage import Stage

log = logging.getLogger(__name__)
# Speech rate used to guess the full length of a chunk cut off mid-synthesis.
_SECONDS_PER_CHAR = 0.065
_KEEP_REPLIES = 8  # replies whose chunk lengths are kept until their final playback report

OUT_RATE = 22050


class TTSBackend(Protocol):
    name: str
    sample_rate: int
    normalize: bool  # speaks core.textnorm.normalize(text) rather than text

    def stream(self, text: str) -> Iterator[np.ndarray]: ...


class HibariBackend:
    """hibari (24 kHz) resampled to the codec's 22,050 Hz so both backends look alike."""

    name = "hibari"
    sample_rate = OUT_RATE

    def __init__(self, threads: int = 1, seed: int = 0, normalize: bool = True) -> None:
        from hibari import Hibari

        self.tts = Hibari(threads=threads)
        self.seed = seed
        self.normalize = normalize

    def stream(self, text: str) -> Iterator[np.ndarray]:
        from voicepipe.audio import resample

        spoken = textnorm.normalize(text) if self.normalize else text
        for chunk in self.tts.stream(spoken, seed=self.seed):
            if len(chunk):
                yield resample(chunk, 24000, OUT_RATE)


class CodecLMBackend:
    name = "codec-lm"
    sample_rate = OUT_RATE

    def __init__(self, cfg: Config) -> None:
        from voicepipe.nn.tts.codec_tts import CodecLMTTS

        # Weights are shared by every session of the process (loaded by the first one, or
        # by the pipeline's preload); a backend holds only its [tts] config and last stats.
        self.tts = CodecLMTTS.shared(cfg)
        self.opts = cfg.tts
        self.normalize = cfg.tts.normalize
        self.last_stats: dict = {}

    def stream(self, text: str) -> Iterator[np.ndarray]:
        stats: dict = {}
        spoken = textnorm.normalize(text) if self.normalize else text
        yield from self.tts.stream(spoken, self.opts, stats)
        self.last_stats = stats

    def submit(self, text: str, session: Hashable) -> Job | None:
        """With ``tts.batching``: ``text`` spoken by the process's TTS batcher (its job
        yields the audio chunks); else None (the caller runs ``stream``)."""
        if not self.opts.batching:
            return None
        from voicepipe.schedulers.tts_batch import tts_batcher_for

        stats: dict = {}
        self.last_stats = stats
        spoken = textnorm.normalize(text) if self.normalize else text
        batcher = tts_batcher_for(self.tts, self.opts.batch_ahead_ms / 1000)
        return batcher.speak(self.tts, spoken, self.opts, session, stats)

    def warm_up(self) -> None:
        self.tts.warm_up()


def make_backend(cfg: Config) -> TTSBackend:
    if cfg.tts.backend == "hibari":
        return HibariBackend(seed=cfg.tts.seed, normalize=cfg.tts.normalize)
    if cfg.tts.backend == "codec-lm":
        return CodecLMBackend(cfg)
    raise ValueError(f"unknown tts.backend {cfg.tts.backend!r} (codec-lm | hibari)")


def preload(cfg: Config) -> None:
    """Load the TTS once per process: the codec-LM's weights (LM, draft, durations,
    codebooks, vocoder) into the share every session's stage uses, warmed up on the
    vocoder's streaming shapes; hibari's ONNX session and the file cache."""
    if cfg.tts.backend == "codec-lm":
        from voicepipe.nn.tts.codec_tts import CodecLMTTS

        CodecLMTTS.shared(cfg).warm_up()
    else:
        make_backend(cfg)


_DONE = object()
AUDIBLE = 10 ** (-40 / 20)  # -40 dBFS: above the codec's noise floor, below any phoneme
MAX_LEAD_DROP_S = 1.0  # a chunk quiet for longer than this is sent as it is


def lead_trim(lead_in_ms: int, sample_rate: int) -> LeadTrim | None:
    """The leading-silence trimmer of one chunk's audio (``[tts] lead_in_ms``; < 0: off)."""
    if lead_in_ms < 0:
        return None
    margin = round(lead_in_ms * sample_rate / 1000)
    return LeadTrim(AUDIBLE, margin, round(MAX_LEAD_DROP_S * sample_rate))


def tail_keep(text: str, tts: TtsConfig, sample_rate: int) -> int | None:
    """How many quiet samples a chunk may end with (``[tts] tail_ms`` after a sentence,
    ``tail_clause_ms`` mid-sentence); None: all of them (-1)."""
    ms = tts.tail_ms if ends_sentence(text) else tts.tail_clause_ms
    return None if ms < 0 else round(ms * sample_rate / 1000)


def trim_edges(pcm: np.ndarray, text: str, tts: TtsConfig, sample_rate: int) -> np.ndarray:
    """A whole chunk's audio as the stage sends it, both edges trimmed (for benches that
    synthesise chunks offline: the seams a listener hears)."""
    x = np.asarray(pcm, np.float32)
    lead = lead_trim(tts.lead_in_ms, sample_rate)
    if lead is not None:
        x = np.concatenate([lead.push(x), lead.flush()])
    keep = tail_keep(text, tts, sample_rate)
    if keep is not None:
        tail = TailTrim(AUDIBLE)
        x = np.concatenate([tail.push(x), tail.end(keep)])
    return x


_SESSIONS = itertools.count(1)


def _warm_up(backend: TTSBackend) -> None:
    warm = getattr(backend, "warm_up", None)
    if warm is not None:
        warm()
        return
    for _ in backend.stream("Okay."):
        pass


class TTSStage(Stage):
    name = "tts"

    def __init__(self, cfg: Config, backend: TTSBackend | None = None) -> None:
        super().__init__(queue_size=32)
        self.cfg = cfg
        self.backend = backend
        self._reply_text: dict[int, list[str]] = {}
        self._spoken: dict[int, SpokenReply] = {}
        self._session = next(_SESSIONS)  # this session's key in the TTS batcher

    async def start(self) -> None:
        if self.backend is None:
            self.backend = await asyncio.to_thread(make_backend, self.cfg)
            # The first synthesis is ~0.7 s slower (allocations, kernel selection); pay it
            # now, while the user is still talking, not in tts.ttfa. (codec-lm: once per
            # process, usually by the pipeline's preload; hibari: per session.)
            await asyncio.to_thread(_warm_up, self.backend)

    async def process(self, frame: Frame) -> None:
        if not isinstance(frame, TextChunk):
            await self.push(frame)
            return
        assert self.backend is not None
        turn = frame.turn_id
        self._reply_text.setdefault(turn, []).append(frame.text)
        if frame.text.strip():
            await self._speak(frame)
        if frame.last:
            text = " ".join(t.strip() for t in self._reply_text.pop(turn, []) if t.strip())
            await self.push(ReplyEnd(turn_id=turn, text=text))

    async def on_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, PlaybackReport) and frame.done:
            reply = self._spoken.pop(frame.reply_turn, None)
            if reply is None or frame.sample_rate <= 0:
                return
            played_s = frame.played_samples / frame.sample_rate
            if played_s < reply.seconds - 0.05:  # cut short, not merely played to the end
                await self.push_upstream(
                    ReplyHeard(turn_id=frame.reply_turn, text=reply.heard(played_s))
                )

    def _record(self, turn: int, text: str, seconds: float, complete: bool) -> None:
        weights = None
        spoken = text
        if getattr(self.backend, "normalize", False):
            # The backend said the normalised text: weigh the original words by it.
            norm = textnorm.normalize_spans(text)
            spoken, weights = norm.text, norm.word_weights()
        if not complete:  # cut mid-chunk: its words spread over the audio it would have had
            seconds = max(seconds, len(spoken) * _SECONDS_PER_CHAR)
        self._spoken.setdefault(turn, SpokenReply()).add(text, seconds, weights)
        while len(self._spoken) > _KEEP_REPLIES:
            del self._spoken[min(self._spoken)]

    async def _speak(self, frame: TextChunk) -> None:
        assert self.backend is not None
        start = now_ns()
        source = _Source(self.backend, frame.text, self._session)
        first = True
        samples = 0
        complete = False
        trim = lead_trim(self.cfg.tts.lead_in_ms, self.backend.sample_rate)
        keep = tail_keep(frame.text, self.cfg.tts, self.backend.sample_rate)
        tail = TailTrim(AUDIBLE) if keep is not None else None
        try:
            while True:
                # One chunk at a time: cancellation (Interrupt) lands between chunks.
                try:
                    chunk = await source.next()
                except Exception as e:  # one bad chunk must not end the session
                    log.exception("tts backend failed on %r", frame.text)
                    await self.push(
                        ErrorFrame(
                            turn_id=frame.turn_id,
                            code="tts_error",
                            message=f"could not speak a chunk: {e!r}",
                            fatal=False,
                        )
                    )
                    break
                if chunk is _DONE:
                    complete = True
                    if trim is not None and samples == 0:  # it never rose above silence
                        rest = trim.flush()
                        await self._send(frame, rest, samples)
                        samples += len(rest)
                    if tail is not None and keep is not None:
                        rest = tail.end(keep)
                        await self._send(frame, rest, samples)
                        samples += len(rest)
                    break
                if self.current_turn > frame.turn_id:
                    return
                pcm = np.asarray(chunk, dtype=np.float32)
                if trim is not None:
                    pcm = trim.push(pcm)
                if tail is not None:
                    pcm = tail.push(pcm)
                if not len(pcm):
                    continue
                if first:
                    first = False
                    await self.push(
                        SpanFrame(
                            turn_id=frame.turn_id,
                            name="tts.ttfa",
                            start_ns=start,
                            end_ns=now_ns(),
                            attrs={
                                "backend": self.backend.name,
                                "chars": len(frame.text),
                                "queued_ms": (start - frame.t_ns) / 1e6,
                            },
                        )
                    )
                await self._send(frame, pcm, samples)
                samples += len(pcm)
        finally:
            self._record(frame.turn_id, frame.text, samples / self.backend.sample_rate, complete)
            source.close()

    async def _send(self, frame: TextChunk, pcm: np.ndarray, sent: int) -> None:
        """One piece of a chunk's audio; its first (``sent`` 0) carries the chunk's text
        (echo gating times its words by it)."""
        assert self.backend is not None
        if not len(pcm):
            return
        text = frame.text if sent == 0 else ""
        await self.push(
            ReplyAudio(
                turn_id=frame.turn_id, pcm=pcm, sample_rate=self.backend.sample_rate, text=text
            )
        )


class _Source:
    """A chunk's audio, one piece at a time: from the process's TTS batcher (codec-lm with
    ``tts.batching``) or by advancing the backend's generator on a worker thread."""

    def __init__(self, backend: TTSBackend, text: str, session: Hashable) -> None:
        submit = getattr(backend, "submit", None)
        self.job: Job | None = submit(text, session) if submit is not None else None
        self.gen = backend.stream(text) if self.job is None else None

    async def next(self) -> object:
        """The next audio chunk, or ``_DONE``."""
        if self.job is not None:
            item = await self.job.next()
            return _DONE if item is DONE else item
        assert self.gen is not None
        return await asyncio.to_thread(next, self.gen, _DONE)  # type: ignore[arg-type]

    def close(self) -> None:
        if self.job is not None:
            self.job.cancel()  # (the batcher drops it before its next round)
            return
        # If the worker thread is still inside the generator (cancelled mid-chunk),
        # close() raises; the generator is then dropped when that chunk returns.
        with contextlib.suppress(ValueError, AttributeError):
            self.gen.close()  # type: ignore[union-attr]
