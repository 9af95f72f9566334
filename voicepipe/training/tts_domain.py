"""`voicepipe train tts-domain`: teacher audio for what the assistant actually says.

The seeded corpus (training/corpus.py) is short templated sentences; the LLM's
replies are longer, with list markers, quoted titles, names, foreign words,
numbers, dates, money and units, which the codec LM heard little of (its
round-trip WER on real replies is several times its held-out figure,
docs/BENCHMARKS.md). This corpus adds, interleaved so any prefix has the mix:

- LLM replies to *training* prompts (draft_prompts.train_prompts, never the
  reply benchmark's prompts): generated through the LLM stage itself
  (``LlmStage.reply``, the configured system prompt, greedy), then cut by the
  stage's Chunker into the chunks the TTS is really handed;
- the prompts themselves (spoken questions);
- templated sentences (``tts_domain_templates``) with numbers, dates, times,
  money, units, names, foreign words, lists and quoted titles.

Every text goes through ``core.textnorm.normalize`` first, as the TTS stage
does, so the LM learns the spoken forms. Layout is tts_data's (manifest.jsonl,
wav/, codes/) under $VOICEPIPE_HOME/data/tts_domain; replies.jsonl caches the
generated replies. Resumable: rerun the same command. Then
``voicepipe train tts-data --codes-only --out DIR`` encodes the codes and
``voicepipe train tts --more-data DIR`` trains on it beside the base corpus.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voicepipe.stages.llm.stage import LlmStage

log = logging.getLogger(__name__)


def domain_dir() -> Path:
    from voicepipe import registry

    return registry.home() / "data" / "tts_domain"


def chunk_reply(reply: str) -> list[str]:
    """The chunks the LLM stage hands the TTS for this reply."""
    from voicepipe.core.text.chunker import Chunker

    ch = Chunker()
    out = ch.push(reply)
    rest = ch.flush()
    return [c for c in [*out, rest] if c and c.strip()]


class _Replies:
    """Greedy replies of the configured LLM to training prompts, cached in replies.jsonl."""

    def __init__(self, cfg, path: Path) -> None:
        self.cfg, self.path = cfg, path
        self.stage: LlmStage | None = None  # built on the first prompt not in the cache
        self.cache: dict[str, str] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self.cache[r["prompt"]] = r["reply"]

    def __call__(self, prompt: str) -> str:
        if prompt in self.cache:
            return self.cache[prompt]
        import asyncio

        from voicepipe.frames import TextDelta
        from voicepipe.stages.llm.engine import engine_for
        from voicepipe.stages.llm.stage import LlmStage

        if self.stage is None:
            self.stage = LlmStage(self.cfg, engine_for(self.cfg))
            self.deltas: list[str] = []

            async def push(frame) -> None:
                if isinstance(frame, TextDelta):
                    self.deltas.append(frame.text)

            self.stage.push = push
        stage = self.stage
        del stage.messages[1 if self.cfg.llm.system_prompt else 0 :]
        self.deltas.clear()
        asyncio.run(stage.reply(1, prompt))
        reply = "".join(self.deltas).strip()
        self.cache[prompt] = reply
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"prompt": prompt, "reply": reply}) + "\n")
        return reply


def texts(cfg, root: Path, n_prompts: int, seed: int = 0) -> Iterator[tuple[str, str, str]]:
    """(id, kind, raw text) in a fixed order: per training prompt its reply's chunks, the
    prompt, and three templated sentences. Ids are stable, so resuming skips by id."""
    from voicepipe.training.draft_prompts import train_prompts
    from voicepipe.training.tts_domain_templates import sentence

    replies = _Replies(cfg, root / "replies.jsonl")
    r = random.Random(seed)
    # The prompts in a seeded shuffle: the list's series differ in kind, and a partial
    # run should sample all of them.
    prompts = train_prompts(n_prompts)
    random.Random(seed + 1).shuffle(prompts)
    for i, prompt in enumerate(prompts):
        tmpl = [sentence(r) for _ in range(3)]  # drawn before any skip: stable across resumes
        for j, c in enumerate(chunk_reply(replies(prompt))):
            yield f"dr{i:05d}_{j:02d}", "reply", c
        yield f"dq{i:05d}", "question", prompt
        for j, t in enumerate(tmpl):
            yield f"dt{i:05d}_{j}", "template", t


def generate(cfg, root: Path, n_prompts: int, seed: int, minutes: float) -> dict:
    """Speak every text not yet in the manifest with hibari; stop after ``minutes`` of audio."""
    from voicepipe.audio import resample, write_wav
    from voicepipe.core.text.norm import normalize
    from voicepipe.nn.tts.hibari_teacher import SAMPLES_PER_UNIT, HibariTeacher
    from voicepipe.training.tts_data import WAV_RATE, read_manifest

    root.mkdir(parents=True, exist_ok=True)
    (root / "wav").mkdir(exist_ok=True)
    rows = read_manifest(root)
    done = {r["id"] for r in rows}
    audio_s = sum(r["n_samples_24k"] for r in rows) / 24000
    teacher = HibariTeacher()
    added, t0 = 0, time.perf_counter()
    with open(root / "manifest.jsonl", "a", encoding="utf-8") as mf:
        for n, (uid, kind, raw) in enumerate(texts(cfg, root, n_prompts, seed)):
            if audio_s >= minutes * 60:
                break
            if uid in done:
                continue
            text = " ".join(normalize(raw).split())
            if not text or len(text.split()) > 60:
                continue
            utt = teacher.synthesize(text, seed=seed * 10**6 + n)
            if utt.n_samples == 0 or sum(utt.durations) * SAMPLES_PER_UNIT != utt.n_samples:
                log.warning("skipping %s: no audio or durations off", uid)
                continue
            write_wav(root / "wav" / f"{uid}.wav", resample(utt.wave, 24000, WAV_RATE), WAV_RATE)
            row = {"id": uid, "text": text, "raw": raw, "kind": kind, "split": "train",
                   "wav": f"wav/{uid}.wav", "phonemes": utt.ids, "durations": utt.durations,
                   "n_samples_24k": utt.n_samples}  # fmt: skip
            mf.write(json.dumps(row) + "\n")
            mf.flush()
            added += 1
            audio_s += utt.n_samples / 24000
            if added % 100 == 0:
                log.info("%d added, %.1f min audio in all, %.0f s wall", added, audio_s / 60,
                         time.perf_counter() - t0)  # fmt: skip
    return {"added": added, "minutes": round(audio_s / 60, 1), "root": str(root)}


def _handler(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    root = Path(args.out) if args.out else domain_dir()
    print(json.dumps(generate(args.config, root, args.n_prompts, args.seed, args.minutes)))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tts-domain",
        help="teacher (hibari) speaks assistant-reply-like text: LLM replies, questions, "
        "numbers, dates, names, lists",
        description=__doc__.split("\n\n")[0] + " Resumable; see training/tts_domain.py.",
    )
    p.add_argument("--out", default="", help="default $VOICEPIPE_HOME/data/tts_domain")
    p.add_argument("--n-prompts", type=int, default=8000, help="training prompts to draw from")
    p.add_argument("--minutes", type=float, default=600.0, help="stop at this much audio")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_handler)
