"""A tuning set for turn-taking: spoken complete and paused requests that are not the
`voicepipe bench turns` set, for choosing the endpointer's numbers without fitting them to
the set the figures are reported on.

    PYTHONPATH=. .venv/bin/python -m voicepipe.bench.turns_tuning   # rewrites data/turns_tuning.*
    voicepipe bench turns --set tuning --kind complete --kind paused --json

Other sentences than bench/turns_set.py's and other espeak-ng voices (American m7, West
Midlands f4, American Klatt: none speaks in the bench set), the same kinds of pause
(numbers read out, "um" / "uh", an unfinished clause, a list) and the same noises.
Only ``complete`` and ``paused`` clips.
"""

from __future__ import annotations

import numpy as np

from voicepipe.bench.turns_set import DATA, Clip, noiser, save
from voicepipe.bench.turns_set import load as _load

NPZ = DATA / "turns_tuning.npz"
MANIFEST = DATA / "turns_tuning.json"
SEED = 20261128
VOICES = ("espeak-us-m7", "espeak-wmid-f4", "espeak-us-klatt")

COMPLETE = (
    "What time does the pharmacy close today?",
    "Send a message to my brother.",
    "Is it going to rain this afternoon?",
    "Set an alarm for six thirty.",
    "Who won the football game last night?",
    "Read me the latest news.",
)
PAUSED: tuple[tuple[tuple[str, ...], tuple[float, ...]], ...] = (
    (("Call me back at", "four one five", "two two nine eight."), (0.9, 0.6)),
    (("Add eggs", "milk", "and bread to my shopping list."), (0.7, 0.5)),
    (("My email is john", "at example dot com."), (1.1,)),
    (("Turn the volume up to", "um", "seven."), (0.5, 0.8)),
    (("How far is it from London to", "Edinburgh?"), (1.3,)),
    (("Schedule a meeting with", "Sarah on Friday."), (0.6,)),
    (("The flight number is", "two eight one."), (1.0,)),
    (("Can you tell me", "uh", "what time it is?"), (0.45, 1.4)),
)


def generate() -> list[Clip]:
    from voicepipe.bench import voices as V

    rng = np.random.default_rng(SEED)
    noisy = noiser(rng, list(COMPLETE) + [" ".join(p) for p, _ in PAUSED], list(VOICES))
    clips: list[Clip] = []

    for i, text in enumerate(COMPLETE):
        v = VOICES[i % len(VOICES)]
        pcm, nz, snr = noisy(V.speak(text, v), i)
        clips.append(Clip(f"complete{i}", "complete", text, v, nz, snr, (), pcm))
    for i, (pieces, pauses) in enumerate(PAUSED):
        v = VOICES[(i + 1) % len(VOICES)]
        pcm = V.join([V.speak(p, v) for p in pieces], list(pauses))
        pcm, nz, snr = noisy(pcm, i + len(COMPLETE))
        text = " … ".join(pieces)
        clips.append(Clip(f"paused{i}", "paused", text, v, nz, snr, pauses, pcm))
    return clips


def load() -> list[Clip]:
    return _load(NPZ, MANIFEST)


if __name__ == "__main__":
    made = generate()
    save(made, NPZ, MANIFEST, SEED, "voicepipe/bench/turns_tuning.py")
    total = sum(len(c.pcm) for c in made) / 16000
    print(f"{len(made)} clips, {total:.1f} s, {NPZ.stat().st_size / 1e6:.2f} MB → {NPZ}")
