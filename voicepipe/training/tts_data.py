"""`voicepipe train tts-data`: the teacher (hibari) speaks the corpus; codec codes per utterance.

Layout under $VOICEPIPE_HOME/data/tts/ (default ~/.cache/voicepipe/data/tts):

    manifest.jsonl   one JSON object per utterance:
                     {"id", "text", "split": "train"|"heldout", "wav": "wav/ID.wav",
                      "phonemes": [ids], "durations": [25-ms units per id], "n_samples_24k"}
    wav/ID.wav       22,050 Hz mono PCM16 (the codec's rate), resampled from hibari's 24 kHz
    codes/ID.npy     (T, Q) int16 codec codes (written by --codes once the codec is trained)

The manifest is appended line by line and flushed, so the run can be killed and
resumed, and the codec can start training on the first utterances while the
rest are still being generated. Held-out utterances come first.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

log = logging.getLogger(__name__)

WAV_RATE = 22050


def data_dir() -> Path:
    from voicepipe import registry

    return registry.home() / "data" / "tts"


def read_manifest(root: Path | None = None) -> list[dict]:
    path = (root or data_dir()) / "manifest.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut short by a kill: redone on resume
                continue
    return rows


def generate(root: Path, n_train: int, n_heldout: int, seed: int, limit: int | None = None) -> int:
    """Synthesize every corpus sentence not yet in the manifest; returns how many were added."""
    from voicepipe.audio import resample, write_wav
    from voicepipe.nn.tts.hibari_teacher import SAMPLES_PER_UNIT, HibariTeacher
    from voicepipe.training.corpus import sentences

    train, heldout = sentences(n_train, n_heldout, seed)
    todo = [(f"ho{i:03d}", t, "heldout") for i, t in enumerate(heldout)]
    todo += [(f"tr{i:05d}", t, "train") for i, t in enumerate(train)]
    done = {r["id"] for r in read_manifest(root)}
    todo = [x for x in todo if x[0] not in done]
    if limit is not None:
        todo = todo[:limit]
    teacher = HibariTeacher()
    (root / "wav").mkdir(parents=True, exist_ok=True)
    added, t0, audio_s = 0, time.perf_counter(), 0.0
    with open(root / "manifest.jsonl", "a", encoding="utf-8") as mf:
        for uid, text, split in todo:
            # Seed per utterance so a resumed run writes the same audio as an uninterrupted one.
            utt = teacher.synthesize(text, seed=int(uid[2:]) + (0 if split == "train" else 10**6))
            if utt.n_samples == 0 or sum(utt.durations) * SAMPLES_PER_UNIT != utt.n_samples:
                log.warning(
                    "skipping %s: %d samples vs durations %d",
                    uid,
                    utt.n_samples,
                    sum(utt.durations) * SAMPLES_PER_UNIT,
                )
                continue
            write_wav(root / "wav" / f"{uid}.wav", resample(utt.wave, 24000, WAV_RATE), WAV_RATE)
            row = {
                "id": uid,
                "text": text,
                "split": split,
                "wav": f"wav/{uid}.wav",
                "phonemes": utt.ids,
                "durations": utt.durations,
                "n_samples_24k": utt.n_samples,
            }
            mf.write(json.dumps(row) + "\n")
            mf.flush()
            added += 1
            audio_s += utt.n_samples / 24000
            if added % 200 == 0:
                log.info(
                    "%d utterances, %.0f s audio, %.0f s wall",
                    added,
                    audio_s,
                    time.perf_counter() - t0,
                )
    return added


def encode_codes(root: Path, model: str, force: bool = False) -> int:
    """Encode each manifest WAV to (T, Q) codes with the trained MelVQ codec (all its levels)."""
    import numpy as np

    from voicepipe.audio import read_wav
    from voicepipe.nn.tts.codec import MelVQCodec

    codec = MelVQCodec.load(model, q=None)
    (root / "codes").mkdir(parents=True, exist_ok=True)
    n = 0
    for row in read_manifest(root):
        out = root / "codes" / f"{row['id']}.npy"
        if out.exists() and not force:
            continue
        wave, sr = read_wav(root / row["wav"])
        assert sr == WAV_RATE, (row["wav"], sr)
        codes = codec.encode_all(wave).numpy()  # every trained level; the LM slices [:, :q]
        tmp = out.with_suffix(".tmp.npy")
        np.save(tmp, codes.astype(np.int16))
        tmp.replace(out)
        n += 1
    return n


def _handler(args: argparse.Namespace) -> int:
    root = Path(args.out) if args.out else data_dir()
    root.mkdir(parents=True, exist_ok=True)
    if not args.codes_only:
        added = generate(root, args.n_train, args.n_heldout, args.seed, args.limit)
        print(f"tts-data: {added} utterances added; manifest {root / 'manifest.jsonl'}")
    if args.codes or args.codes_only:
        n = encode_codes(root, args.codec_model, args.force)
        print(f"tts-data: {n} utterances encoded to {root / 'codes'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tts-data",
        help="teacher (hibari) speaks the generated corpus: WAVs, phonemes, durations, codes",
        description=(
            "Generate the codec-LM training data under $VOICEPIPE_HOME/data/tts: a seeded corpus "
            "of "
            "sentences, hibari audio resampled to 22,050 Hz, hibari's phoneme ids and per-phoneme "
            "durations (25 ms units), and with --codes the MelVQ codec codes. Resumable: rerun to "
            "continue where a killed run stopped."
        ),
    )
    p.add_argument("--out", default="", help="output directory (default $VOICEPIPE_HOME/data/tts)")
    p.add_argument("--n-train", type=int, default=4000, help="training sentences (default 4000)")
    p.add_argument("--n-heldout", type=int, default=60, help="held-out sentences (default 60)")
    p.add_argument("--seed", type=int, default=0, help="corpus seed (default 0)")
    p.add_argument("--limit", type=int, default=None, help="add at most N utterances this run")
    p.add_argument("--codes", action="store_true", help="also encode WAVs to codec codes")
    p.add_argument("--codes-only", action="store_true", help="only encode WAVs to codec codes")
    p.add_argument(
        "--codec-model", default="melvq-hibari", help="codec model (default melvq-hibari)"
    )
    p.add_argument("--force", action="store_true", help="re-encode codes that already exist")
    p.set_defaults(func=_handler)
