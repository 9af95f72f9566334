"""`voicepipe train draft-questions`: questions for the draft's data, worded by the target.

The draft agrees with the 1.5B on 69 % of first tokens on held-out replies to its own
training prompts, but on 50 % on the replies to hand-written open questions
(teacher-forced, both on the same checkpoint: the fit's ``val_top1``, ``bench draft
--agreement``): the templated prompt series cover a narrow band of requests, and the
draft learns the replies to that band. Another few thousand replies of the same series
moved the open-question speedup by hundredths. What widens the band is other questions,
asked the way people ask them; this writes them with the target itself: for every
topic and asking style of ``draft_topics``, one greedy question, then the same again
asked by someone in each of its situations (``ASKERS``), eight rows a pass
(``draft_data.batched_replies``), cleaned, deduplicated, and never one that is or holds a
benchmark's prompt. ``train draft-data --questions FILE`` then answers them
(``draft_data_prompts.file_prompts`` reads the file).

The file is JSON lines (``{"key": topic|style, "question": ...}``, one per instruction,
``question`` empty where the output was no usable question) appended as rows finish,
so a killed job resumes with the instructions not yet in it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from voicepipe.training import draft_shard as shard
from voicepipe.training.draft_topics import ASKERS, STYLES, topics

SYSTEM = "You write the questions people ask a voice assistant out loud."
# Questions about the assistant rather than the topic ("Can the voice assistant tell me...").
_META = re.compile(r"\b(?:voice assistant|AI|assistant)\b", re.I)


def instructions() -> list[tuple[str, str]]:
    """(key, instruction) for every topic and style, then for every topic, style and
    asker, in rounds: each round asks every topic once, in a style (and asker) that turns
    with the topic, so any prefix of either pass (``--n``) spans all topics and styles.
    The first pass's keys are ``topic|style``, the second's ``topic|style|asker``."""
    out = []
    ts = topics()
    ask = "as a person would say it out loud. Reply with the question only."
    for i in range(len(STYLES)):
        for j, topic in enumerate(ts):
            style = STYLES[(i + j) % len(STYLES)]
            out.append((f"{topic}|{style}", f"Write one {style} {topic}, {ask}"))
    for r in range(len(STYLES) * len(ASKERS)):  # every (style, asker) pair once a topic
        for j, topic in enumerate(ts):
            style = STYLES[(r + j) % len(STYLES)]
            asker = ASKERS[(r // len(STYLES) + j) % len(ASKERS)]
            text = f"Write one {style} {topic}, asked by someone {asker}, {ask}"
            out.append((f"{topic}|{style}|{asker}", text))
    return out


def clean(text: str) -> str:
    """The question in a model's output, or "" when there is none usable: the first
    line, without quotes or a "Question:" label; 3-40 words, a question or a request
    (ending in "?", "." or "!"), not one about the assistant itself."""
    line = text.strip().split("\n", 1)[0].strip()
    line = re.sub(r"^(?:question\s*:\s*|\d+[.)]\s*|[-*]\s*)", "", line, flags=re.I)
    line = line.strip().strip("\"'“”‘’").strip()
    n = len(line.split())
    if not line.endswith(("?", ".", "!")) or not 3 <= n <= 40 or _META.search(line):
        return ""
    return line


def done_keys(path: Path) -> set[str]:
    """The instructions (topic|style) a file already holds an answer to, usable or not."""
    if not path.exists():
        return set()
    return {json.loads(x)["key"] for x in path.read_text(encoding="utf-8").splitlines() if x}


def run(args: argparse.Namespace) -> int:
    from voicepipe.training.draft_data import batched_replies, serving_engine

    cfg = args.config
    model = args.model or cfg.llm.model
    out = Path(args.out) if args.out else shard.default_dir(model) / "questions.jsonl"
    todo_all = instructions()[: args.n or None]
    have = done_keys(out)
    todo = [(k, t) for k, t in todo_all if k not in have]
    print(f"{out}: {len(have)} instructions done, {len(todo)} to go", flush=True)
    if not todo:
        return 0
    eng = serving_engine(cfg, model, 512)
    tok = eng.tokenizer
    prefix = tok.chat_ids([{"role": "system", "content": SYSTEM}], add_generation_prompt=False)
    keys: dict[str, str] = {}
    jobs = []
    for k, text in todo:
        ids = tok.chat_ids(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        )
        job = shard.Reply.ask(text, ids)
        keys[job.pid] = k
        jobs.append(job)
    if all(j.prompt[: len(prefix)] == prefix for j in jobs):
        eng.share_prefix(prefix)  # the system turn's rows computed once
    out.parent.mkdir(parents=True, exist_ok=True)
    t0, n, kept = time.perf_counter(), 0, 0
    with out.open("a", encoding="utf-8") as f:
        for r in batched_replies(eng, jobs, args.rows, 48, set(tok.stop_ids)):
            q = clean(tok.decode(r.reply))
            f.write(json.dumps({"key": keys[r.pid], "question": q}) + "\n")
            f.flush()
            n, kept = n + 1, kept + bool(q)
            if n % 64 == 0 or n == len(jobs):
                rate = n / (time.perf_counter() - t0)
                print(
                    f"questions {n}/{len(jobs)} ({kept} usable) | {rate * 3600:.0f}/h | "
                    f"ETA {(len(jobs) - n) / rate / 60:.0f} min | last: {q or '-'}",
                    flush=True,
                )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "draft-questions",
        help="questions for the draft's data, written by the target per topic and style (resumes)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="", help="target model (default: config llm.model)")
    p.add_argument(
        "--out",
        default="",
        help="JSON lines file (default data/draft/<model>/questions.jsonl in the repository)",
    )
    p.add_argument("--n", type=int, default=0, help="first N instructions only (default: all)")
    p.add_argument("--rows", type=int, default=8, help="questions in flight per pass (default 8)")
    p.set_defaults(func=_handler)


def _handler(args: argparse.Namespace) -> int:
    if args.rows < 1 or args.n < 0:
        print("--rows must be at least 1 and --n not negative", file=sys.stderr)
        return 2
    return run(args)
