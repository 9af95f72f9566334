"""The spoken situations of `voicepipe bench turns`: generated once, committed compactly.

    PYTHONPATH=. .venv/bin/python -m voicepipe.bench.turns_set   # rewrites data/turns_set.npz

Every clip is spoken by an espeak-ng voice of ``voicepipe.bench.voices`` (voices that
trained nothing here), with noise mixed at an exact SNR, and stored as 16 kHz int16 in
one compressed ``.npz`` beside a JSON manifest (what each clip says, its voice, noise,
pauses). The bench sends half of them at 48 kHz (resampled when sent) so the server's
resampling path is in the measurement too. Kinds:

- ``complete``: a whole request, no pause inside;
- ``paused``: a request with pauses of 400–1,500 ms inside it (numbers, "um", an
  unfinished clause): one turn, however long the pauses;
- ``question``: a request whose answer is long enough to talk over;
- ``backchannel``: what a listener says while the assistant talks ("mm-hmm", "yeah",
  "right", "okay", a cough);
- ``interruption``: a real interruption ("wait, stop", "no, I meant Spain").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"
NPZ = DATA / "turns_set.npz"
MANIFEST = DATA / "turns_set.json"
SR = 16000
SEED = 20261127

VOICES = ("espeak-us-m", "espeak-rp-f3", "espeak-scot-f2", "espeak-carib-m3")
NOISES = (("pink", 25.0), ("cafe", 15.0), ("brown", 20.0), ("pink", 15.0))

COMPLETE = (
    "Turn on the kitchen lights.",
    "What is the weather like in Paris tomorrow?",
    "How many days are there in a leap year?",
    "Play some quiet music please.",
)
# Pieces joined by pauses (seconds): one request each.
PAUSED: tuple[tuple[tuple[str, ...], tuple[float, ...]], ...] = (
    (("My number is five five five.", "one two three four."), (0.8,)),
    (("I'd like to book a table for", "um", "four people."), (0.6, 0.5)),
    (("Set a timer for", "twenty minutes."), (1.0,)),
    (("What is the capital of", "Canada?"), (0.7,)),
    (("Remind me to call", "my sister tomorrow."), (1.2,)),
    (("The code is four", "nine", "two."), (0.4, 1.5)),
)
QUESTIONS = ("Tell me a short story about a brave little robot who learns to swim.",)
BACKCHANNELS = ("Mm-hmm.", "Yeah.", "Right.", "Okay.", "<cough>")
INTERRUPTIONS = ("Wait, stop.", "No, I meant Spain.", "Hold on a second.", "Stop, stop.")


@dataclass(frozen=True)
class Clip:
    name: str
    kind: str
    text: str  # what is said ("<cough>": no words)
    voice: str
    noise: str
    snr_db: float
    pauses_s: tuple[float, ...]
    pcm: np.ndarray  # float32 at SR


def _cough(rng: np.random.Generator) -> np.ndarray:
    """A cough: two bursts of shaped noise (a sharp onset, a ~120 ms decay), voiced a little."""
    from voicepipe.bench import voices as V

    out = []
    for length_s in (0.18, 0.14):
        n = int(length_s * SR)
        t = np.arange(n) / SR
        env = (1 - np.exp(-t / 0.004)) * np.exp(-t / 0.06)
        burst = V.pink_noise(n, rng) * 0.6 + 0.4 * np.sin(2 * np.pi * 180 * t)
        out += [(0.5 * env * burst).astype(np.float32), np.zeros(int(0.12 * SR), np.float32)]
    return np.concatenate(out[:-1])


Noisy = Callable[[np.ndarray, int], tuple[np.ndarray, str, float]]


def noiser(rng: np.random.Generator, texts: list[str], voices: list[str]) -> Noisy:
    """``noisy(pcm, k)``: ``pcm`` under the k-th of ``NOISES`` (a café babbles ``texts``
    in ``voices``) at its SNR; with the noise's kind and SNR. Shared by the tuning set."""
    from voicepipe.bench import voices as V

    def noisy(pcm: np.ndarray, k: int) -> tuple[np.ndarray, str, float]:
        kind, snr = NOISES[k % len(NOISES)]
        n = len(pcm)
        if kind == "pink":
            noise = V.pink_noise(n, rng)
        elif kind == "brown":
            noise = V.brown_noise(n, rng)
        else:
            noise = V.cafe(n, rng, texts, voices)
        return V.mix_at_snr(pcm, noise, snr), kind, snr

    return noisy


def generate() -> list[Clip]:
    from voicepipe.bench import voices as V

    rng = np.random.default_rng(SEED)
    noisy = noiser(rng, list(COMPLETE) + [" ".join(p) for p, _ in PAUSED], list(VOICES))
    clips: list[Clip] = []

    k = 0
    for i, text in enumerate(COMPLETE):
        v = VOICES[i % len(VOICES)]
        pcm, nz, snr = noisy(V.speak(text, v), k)
        clips.append(Clip(f"complete{i}", "complete", text, v, nz, snr, (), pcm))
        k += 1
    for i, (pieces, pauses) in enumerate(PAUSED):
        v = VOICES[i % len(VOICES)]
        pcm = V.join([V.speak(p, v) for p in pieces], list(pauses))
        pcm, nz, snr = noisy(pcm, k)
        text = " … ".join(pieces)
        clips.append(Clip(f"paused{i}", "paused", text, v, nz, snr, pauses, pcm))
        k += 1
    for i, text in enumerate(QUESTIONS):
        pcm, nz, snr = noisy(V.speak(text, VOICES[0]), 0)
        clips.append(Clip(f"question{i}", "question", text, VOICES[0], nz, snr, (), pcm))
    for i, text in enumerate(BACKCHANNELS):
        v = VOICES[(i + 1) % len(VOICES)]
        pcm = _cough(rng) if text == "<cough>" else V.speak(text, v)
        pcm, nz, snr = noisy(pcm, k)
        clips.append(Clip(f"backchannel{i}", "backchannel", text, v, nz, snr, (), pcm))
        k += 1
    for i, text in enumerate(INTERRUPTIONS):
        v = VOICES[(i + 2) % len(VOICES)]
        pcm, nz, snr = noisy(V.speak(text, v), k)
        clips.append(Clip(f"interruption{i}", "interruption", text, v, nz, snr, (), pcm))
        k += 1
    return clips


def save(
    clips: list[Clip],
    npz: Path = NPZ,
    manifest: Path = MANIFEST,
    seed: int = SEED,
    generator: str = "voicepipe/bench/turns_set.py",
) -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    arrays = {c.name: np.round(np.clip(c.pcm, -1, 1) * 32767).astype(np.int16) for c in clips}
    np.savez_compressed(npz, **arrays)  # type: ignore[arg-type]
    meta = [
        {
            "name": c.name,
            "kind": c.kind,
            "text": c.text,
            "voice": c.voice,
            "noise": c.noise,
            "snr_db": c.snr_db,
            "pauses_s": list(c.pauses_s),
            "seconds": round(len(c.pcm) / SR, 3),
        }
        for c in clips
    ]
    doc = {"sample_rate": SR, "seed": seed, "generator": generator}
    manifest.write_text(json.dumps({**doc, "clips": meta}, indent=1) + "\n")


def load(npz: Path = NPZ, manifest: Path = MANIFEST) -> list[Clip]:
    """The committed set (float32 at 16 kHz)."""
    if not npz.is_file() or not manifest.is_file():
        maker = json.loads(manifest.read_text())["generator"] if manifest.is_file() else ""
        module = maker.removesuffix(".py").replace("/", ".") or "voicepipe.bench.turns_set"
        raise FileNotFoundError(f"{npz} missing: python -m {module}")
    meta = json.loads(manifest.read_text())["clips"]
    with np.load(npz) as z:
        return [
            Clip(
                m["name"],
                m["kind"],
                m["text"],
                m["voice"],
                m["noise"],
                float(m["snr_db"]),
                tuple(m["pauses_s"]),
                z[m["name"]].astype(np.float32) / 32767,
            )
            for m in meta
        ]


if __name__ == "__main__":
    made = generate()
    save(made)
    total = sum(len(c.pcm) for c in made) / SR
    print(f"{len(made)} clips, {total:.1f} s, {NPZ.stat().st_size / 1e6:.2f} MB → {NPZ}")
