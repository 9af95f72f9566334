"""Regenerate the spoken test clips for the ASR tests (committed output; rerun to reproduce).

    .venv/bin/python tests/data/asr/make_clips.py

The teacher voice (hibari-tts, voice "heart", fixed seeds) speaks each
sentence at 24 kHz; clips are resampled to 16 kHz mono PCM16 WAV and padded
with a little silence so the endpointer sees the end of speech. Noise is
seeded, so the output is bit-identical from run to run on the same versions.
``manifest.json`` holds the reference texts and what each clip is for.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from voicepipe.audio import resample, write_wav

HERE = Path(__file__).resolve().parent
SR = 16000
LEAD_S = 0.4  # silence before speech
TRAIL_S = 0.9  # silence after speech: more than vad.end_silence_ms so the endpoint fires

UTTERANCES = [
    "Turn on the kitchen lights.",
    "What is the weather like in Paris tomorrow?",
    "Set a timer for fifteen minutes.",
    "How many days are there in a leap year?",
    "Please call my sister at seven thirty tonight.",
    "The train leaves from platform nine at twenty past four.",
    "Can you play some quiet music while I read?",
    "Add three apples, two lemons and a loaf of bread to my shopping list.",
    "What time is it in Tokyo right now?",
    "Remind me to water the plants on Sunday morning.",
    "My flight number is two hundred and forty six.",
    "Why is the sky blue?",
    "Hello.",
    "Tell me a short story about a brave little robot who learns to swim.",
]
STREAM = ("Good morning, how are you today?", "I would like to book a table for two people.")
NOISY = "Could you open the window a little bit?"
STREAM_PAUSE_S = 1.5
NOISE_SNR_DB = 15.0


def pink_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """1/f noise by shaping white noise in the frequency domain (sounds like a fan / room)."""
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1.0 / SR)
    spec = spec / np.sqrt(np.maximum(f, 20.0))
    x = np.fft.irfft(spec, n)
    return (x / (np.sqrt(np.mean(x**2)) + 1e-12)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SR), np.float32)


def pad(speech: np.ndarray) -> np.ndarray:
    return np.concatenate([silence(LEAD_S), speech, silence(TRAIL_S)])


def main() -> None:
    from hibari import Hibari

    tts = Hibari()
    rng = np.random.default_rng(1234)

    def say(text: str, seed: int) -> np.ndarray:
        return resample(tts(text, seed=seed), tts.sample_rate, SR)

    clips: list[dict] = []
    for i, text in enumerate(UTTERANCES):
        name = f"utt{i:02d}.wav"
        write_wav(HERE / name, pad(say(text, seed=i)), SR)
        clips.append({"file": name, "kind": "utterance", "finals": [text]})

    a, b = (say(t, seed=100 + j) for j, t in enumerate(STREAM))
    write_wav(HERE / "stream2.wav", pad(np.concatenate([a, silence(STREAM_PAUSE_S), b])), SR)
    clips.append({"file": "stream2.wav", "kind": "stream", "finals": list(STREAM)})

    speech = pad(say(NOISY, seed=200))
    noise = pink_noise(len(speech), rng)
    voiced = speech[int(LEAD_S * SR) : -int(TRAIL_S * SR)]
    gain = np.sqrt(np.mean(voiced**2)) / 10 ** (NOISE_SNR_DB / 20)
    write_wav(HERE / "noisy.wav", speech + gain * noise, SR)
    clips.append({"file": "noisy.wav", "kind": "noisy", "finals": [NOISY], "snr_db": NOISE_SNR_DB})

    # A faint noise floor rather than digital zeros: real "silence" from a mic.
    write_wav(HERE / "silence.wav", 10 ** (-60 / 20) * pink_noise(3 * SR, rng), SR)
    clips.append({"file": "silence.wav", "kind": "silence", "finals": []})
    # Noise at a typical speech level (-26 dBFS RMS): must not become words.
    white = rng.standard_normal(2 * SR).astype(np.float32)
    noise_only = np.concatenate([pink_noise(2 * SR, rng), white / np.sqrt(np.mean(white**2))])
    write_wav(HERE / "noise.wav", 10 ** (-26 / 20) * noise_only, SR)
    clips.append({"file": "noise.wav", "kind": "noise", "finals": []})

    manifest = {"sample_rate": SR, "voice": tts.voice, "generator": "make_clips.py", "clips": clips}
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(len(c["finals"]) for c in clips)
    print(f"wrote {len(clips)} clips ({total} utterances) to {HERE}")


if __name__ == "__main__":
    main()
