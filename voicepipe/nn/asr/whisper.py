"""Whisper (CTranslate2, via faster-whisper) for short utterances: a window sized to the audio.

faster-whisper pads every window to 30 s (3000 mel frames), so a 2 s
utterance pays for 30 s of encoder. The CTranslate2 encoder accepts fewer
frames, so here the window is the utterance plus ``pad_s`` of padding (zero
features, as faster-whisper pads), rounded up to whole seconds so that few
distinct shapes occur. Measured on the committed clips with tiny.en: a bare
window (no padding) makes Whisper loop ("Hello. Hello. Hello. …"), 2 s of
padding still loops now and then, 3 s matched the 30 s window's WER at a
fraction of its encoder cost. Loops still happen on some cut-off prefixes;
see ``transcribe`` for how they are handled.

Decoding: greedy (beam from config, 1 by default), no timestamps, no
conditioning on earlier text (each call transcribes one utterance), the
token budget bounded by the audio's length. ``no_speech_prob`` (Whisper's own
probability that the window holds no speech) above the threshold turns the
result into "no speech": with the window mostly real audio, it separates
noise from speech well (noise ≈ 0.9, speech < 0.3 on the test clips).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from voicepipe.nn.threads import BUDGET

SAMPLE_RATE = 16000
FRAMES_PER_S = 100  # mel hop 160 at 16 kHz
FULL_FRAMES = 3000  # Whisper's native 30 s window
log = logging.getLogger(__name__)
TOKENS_PER_S = 8  # generous upper bound on speech tokens per second of audio
# Silence added around the utterance before the mel, and a -80 dBFS dither over all of
# it (digital zeros, as in synthetic clips, are not what Whisper was trained on). On
# prefixes of the test clips this cut decoding loops from ~24% to ~4%.
LEAD_S = 0.3
TAIL_S = 0.3
DITHER = 1e-4


@dataclass(frozen=True)
class Hypothesis:
    text: str  # "" when the window held no speech
    raw_text: str  # what Whisper produced, before no-speech gating
    no_speech_prob: float
    avg_logprob: float
    audio_s: float
    window_s: float
    encode_s: float
    decode_s: float
    retried: bool = False
    abandoned: bool = False  # stopped after the encoder (``transcribe``'s ``abandon``)

    @property
    def seconds(self) -> float:
        return self.encode_s + self.decode_s


def _loop_start(text: str, n: int = 3) -> int | None:
    """Word index where the text starts repeating an earlier n-word run, or None."""
    keys = [re.sub(r"[^\w']+", "", w.lower()) for w in text.split()]
    seen: set[tuple[str, ...]] = set()
    for i in range(len(keys) - n + 1):
        gram = tuple(keys[i : i + n])
        if gram in seen:
            return i  # the first repeat: an earlier start would have been caught earlier
        seen.add(gram)
    return None


def repeats(text: str, n: int = 3) -> bool:
    """True when some n-word run occurs twice: the signature of a Whisper decoding loop."""
    return _loop_start(text, n) is not None


def periodic(text: str) -> bool:
    """The whole text is one phrase said two or more times ("Hello Hello"): maybe a loop.

    Too short for the n-gram test, and sometimes real ("bye bye"), so it only earns a
    second decode, never a cut.
    """
    keys = [re.sub(r"[^\w']+", "", w.lower()) for w in text.split()]
    n = len(keys)
    return any(n % p == 0 and keys == keys[:p] * (n // p) for p in range(1, n // 2 + 1))


def cut_loop(text: str, n: int = 3) -> str:
    """The text up to where a decoding loop begins ("Hi there. Hi there. Hi" → "Hi there.")."""
    i = _loop_start(text, n)
    return text if i is None else " ".join(text.split()[:i])


_warmed: set[tuple[str, str, int]] = set()


@lru_cache(maxsize=4)
def _load(name: str, compute_type: str, threads: int):
    from faster_whisper import WhisperModel

    from voicepipe import registry

    return WhisperModel(
        str(registry.resolve(name)), device="cpu", compute_type=compute_type, cpu_threads=threads
    )


class WhisperAsr:
    """Thread-safe for one caller at a time per instance (a lock serialises calls)."""

    def __init__(
        self,
        model: str = "whisper-tiny.en",
        *,
        compute_type: str = "int8",
        threads: int = 2,
        beam_size: int = 1,
        language: str = "en",
        pad_s: float = 3.0,
        no_speech_threshold: float = 0.6,
    ) -> None:
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        self.name = model
        self.whisper = _load(model, compute_type, threads)
        self.ct2 = self.whisper.model  # ctranslate2.models.Whisper
        self.features = self.whisper.feature_extractor
        tok = Tokenizer(
            self.whisper.hf_tokenizer,
            self.ct2.is_multilingual,
            task="transcribe",
            language=language if self.ct2.is_multilingual else "en",
        )
        self.tokenizer = tok
        self.prompt = [*tok.sot_sequence, tok.no_timestamps]
        self.suppress = get_suppressed_tokens(tok, [-1])
        self.beam_size = beam_size
        self.pad_s = pad_s
        self.no_speech_threshold = no_speech_threshold
        self._lock = threading.Lock()
        key = (model, compute_type, threads)
        if key not in _warmed:  # the first decode of a fresh model is slow: not on a user turn
            _warmed.add(key)
            self.warmup()

    @classmethod
    def from_config(cls, cfg) -> WhisperAsr:
        a = cfg.asr
        return cls(
            a.model,
            compute_type=a.compute_type,
            threads=a.threads,
            beam_size=a.beam_size,
            language=a.language,
            pad_s=a.window_pad_s,
            no_speech_threshold=a.no_speech_threshold,
        )

    def warmup(self) -> None:
        """One decode of a second of quiet noise, so the first real request is not the slow one."""
        rng = np.random.default_rng(0)
        self.transcribe(0.001 * rng.standard_normal(SAMPLE_RATE).astype(np.float32))

    def _window_frames(self, n_frames: int, pad_s: float) -> int:
        want = n_frames + round(pad_s * FRAMES_PER_S)
        return min(FULL_FRAMES, -(-want // FRAMES_PER_S) * FRAMES_PER_S)

    def _run(
        self,
        mel: np.ndarray,
        frames: int,
        max_tokens: int,
        beam_size: int,
        abandon: Callable[[], bool] | None = None,
    ):
        import ctranslate2

        n = mel.shape[-1]
        x = mel[:, :frames] if n >= frames else np.pad(mel, ((0, 0), (0, frames - n)))
        t0 = time.perf_counter()
        enc = self.ct2.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(x[None])))
        t1 = time.perf_counter()
        if abandon is not None and abandon():
            return None, t1 - t0
        res = self.ct2.generate(
            enc,
            [self.prompt],
            beam_size=beam_size,
            max_length=len(self.prompt) + max_tokens,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=self.suppress,
        )[0]
        t2 = time.perf_counter()
        tokens = res.sequences_ids[0]
        text = self.tokenizer.decode(tokens).strip()
        # CTranslate2's score is the cumulative log-prob normalised by length (penalty 1).
        avg_logprob = res.scores[0] * len(tokens) / (len(tokens) + 1) if res.scores else 0.0
        return text, float(res.no_speech_prob), float(avg_logprob), t1 - t0, t2 - t1

    def transcribe(
        self,
        pcm: np.ndarray,
        *,
        retry: bool = True,
        beam_size: int | None = None,
        abandon: Callable[[], bool] | None = None,
    ) -> Hypothesis:
        """Text of one utterance (16 kHz mono float32), or "" if Whisper hears no speech.

        A decode that loops is redone once with a 2 s longer window (loops depend on the
        exact window; measured on prefixes of the test clips: ~6% loop at any one pad),
        and whatever still loops is cut where the loop begins (the loop restarts the
        utterance, so the text before it is the transcript). ``retry=False`` (partials)
        only cuts. ``beam_size`` overrides the instance's (partials decode greedily).
        ``abandon``: asked once the encoder has run (a CTranslate2 call cannot be stopped
        midway); True skips the text decoder and returns an empty, ``abandoned`` result
        (a partial whose audio a pause's decode is about to cover).
        """
        beam = self.beam_size if beam_size is None else beam_size
        if beam < 1:
            raise ValueError(f"beam_size must be >= 1, got {beam}")
        pcm = np.asarray(pcm, dtype=np.float32).reshape(-1)
        audio_s = len(pcm) / SAMPLE_RATE
        x = np.concatenate(
            [
                np.zeros(round(LEAD_S * SAMPLE_RATE), np.float32),
                pcm,
                np.zeros(round(TAIL_S * SAMPLE_RATE), np.float32),
            ]
        )
        x += DITHER * np.random.default_rng(len(pcm)).standard_normal(len(x)).astype(np.float32)
        with self._lock, BUDGET.claim(1):  # (counted: voicepipe/nn/threads.py)
            mel = self.features(x)[:, :-1]  # (80, T); the last frame covers only padding
            frames = self._window_frames(mel.shape[-1], self.pad_s)
            max_tokens = min(220, int(TOKENS_PER_S * audio_s) + 10)
            got = self._run(mel, frames, max_tokens, beam, abandon)
            if got[0] is None:
                return Hypothesis("", "", 1.0, 0.0, audio_s, frames / FRAMES_PER_S, got[1], 0.0,
                                  abandoned=True)  # fmt: skip
            text, nsp, lp, te, td = got
            retried = False
            if retry and (repeats(text) or periodic(text)) and frames < FULL_FRAMES:
                log.debug("decode loop in a %.0f s window, retrying: %r", frames / 100, text)
                frames = self._window_frames(mel.shape[-1], self.pad_s + 2.0)
                text, nsp, lp, te2, td2 = self._run(mel, frames, max_tokens, beam)
                te, td, retried = te + te2, td + td2, True
        text = cut_loop(text)
        speech = nsp <= self.no_speech_threshold and any(c.isalnum() for c in text)
        return Hypothesis(
            text=text if speech else "",
            raw_text=text,
            no_speech_prob=nsp,
            avg_logprob=lp,
            audio_s=audio_s,
            window_s=frames / FRAMES_PER_S,
            encode_s=te,
            decode_s=td,
            retried=retried,
        )
