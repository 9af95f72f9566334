"""`voicepipe bench textnorm`: does the TTS text front-end make LLM-style text intelligible?

Each backend (hibari, codec-lm) speaks a fixed set of LLM-style sentences
(list markers, quotes, numbers, dates, money, units, abbreviations, URLs,
emoji) twice: raw, and through ``core.textnorm.normalize`` (``tts.normalize``).
Whisper transcribes each; WER is scored after passing both the reference (the
sentence as written) and the transcript through the same front-end, so "1969"
and "nineteen sixty-nine", "$3.50" and "three dollars and fifty cents" compare
equal, and only what was *said* differently counts.
"""

from __future__ import annotations

import argparse
import json

SENTENCES = [
    '1. Read "Romeo and Juliet" by Shakespeare first.',
    "2. You've been doing great, keep it up!",
    "- Preheat the oven to 180°C for 25 min.",
    "The Moon is about 384,400 km away from Earth.",
    "Apollo 11 landed on July 20, 1969, with 2 astronauts.",
    "It costs $3.50, or about €3 and £2.80.",
    "Dr. Smith vs. Mr. Jones: the match starts at 10:30 am.",
    "Sales grew 12.5% in 2023, e.g. in Canada.",
    "**Tip:** drink 2 L of water a day 😀",
    "Visit https://www.example.com/help for more info.",
    "The 3rd and 22nd items cost $1,299 each.",
    "Rock & roll started in the 1950s (roughly).",
    "It's 60 mph, i.e. about 97 km/h.",
    "Set the timer for 14:05 on 2024-03-03.",
]


def _speak(backend, text: str):
    import numpy as np

    chunks = [c for c in backend.stream(text) if len(c)]
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


def run(cfg, backends: list[str]) -> dict:
    from voicepipe.core.text.norm import normalize
    from voicepipe.core.text.wer import wer
    from voicepipe.roundtrip import transcribe
    from voicepipe.stages.tts import CodecLMBackend, HibariBackend

    refs = [normalize(s) for s in SENTENCES]
    rows = []
    for name in backends:
        backend = HibariBackend() if name == "hibari" else CodecLMBackend(cfg)
        _speak(backend, "Warm up.")
        for norm in (False, True):
            backend.normalize = norm
            hyps = [transcribe(_speak(backend, s), backend.sample_rate) for s in SENTENCES]
            spoken = [normalize(h) for h in hyps]
            rows.append(
                {
                    "backend": name,
                    "normalize": norm,
                    "wer": wer(refs, spoken),
                    "n": len(SENTENCES),
                    "transcripts": hyps,
                }
            )
    return {"sentences": SENTENCES, "rows": rows}


def _handler(args: argparse.Namespace) -> int:
    out = run(args.config, args.backends.split(","))
    if args.json:
        print(json.dumps(out))
    else:
        for r in out["rows"]:
            print(f"{r['backend']:9s} normalize={r['normalize']!s:5s} wer={100 * r['wer']:.1f}%")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "textnorm",
        help="TTS text front-end: round-trip WER of LLM-style sentences, raw vs normalised",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--backends", default="hibari,codec-lm", help="comma-separated backends")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_handler)
