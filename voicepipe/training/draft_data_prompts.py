"""The prompts `voicepipe train draft-data` answers, and every benchmark's prompts it must avoid.

``data_prompts`` joins the first three series (``draft_prompts.train_prompts``: one-slot
templates, ~8,000) and the fourth (``draft_prompts_spoken``: many domains, two-slot
requests, spoken framing), interleaved with a seed so every prefix of the list mixes
them, and drops any prompt that is, or contains, a benchmark's prompt
(``benchmark_prompts``, compared after ``draft_prompts.norm``: case and punctuation
ignored). A draft judged on a question it was trained on would flatter itself.
"""

from __future__ import annotations

import functools
import json
import random
import re
from pathlib import Path

from voicepipe.training.draft_prompts import norm

# Every prompt the first three series can give (train_prompts saturates below this).
OLD_SERIES = 12000


def benchmark_prompts() -> dict[str, list[str]]:
    """Each benchmark's prompts (user turns), by where they come from."""
    from voicepipe.bench import batch, e2e, llm, memory
    from voicepipe.bench.answers import SET_PATH, load_set
    from voicepipe.training.draft_prompts import OPEN_PROMPTS, heldout_prompts

    replies = Path(e2e.__file__).with_name("data") / "tts_reply_prompts.json"
    return {
        "bench answers": [t for i in load_set(SET_PATH).items for t in i.turns],
        "bench draft --prompts open": list(OPEN_PROMPTS),
        "bench draft --prompts assistant": heldout_prompts(),
        "bench llm / replay": [p for ps in llm.PROMPTS.values() for p in ps],
        "bench batch": batch.questions(),
        "bench e2e / soak / hostile": list(e2e.QUESTIONS),
        "bench memory": list(memory.QUESTIONS),
        "bench tts --set replies": json.loads(replies.read_text())["prompts"],
    }


def _matcher(bench: list[str]) -> tuple[set[str], re.Pattern[str]]:
    """Benchmark keys, and a pattern finding a benchmark question of ≥ 3 words inside a
    longer prompt (a question with an opener or a closer is the same question)."""
    keys = {norm(p) for p in bench}
    longs = sorted((k for k in keys if len(k.split()) >= 3), key=len, reverse=True)
    return keys, re.compile(r"(?:^| )(?:" + "|".join(map(re.escape, longs)) + r")(?: |$)")


def overlaps(prompts: list[str], bench: list[str]) -> list[str]:
    """The prompts that are, or contain, one of ``bench`` (normalised)."""
    keys, inside = _matcher(bench)
    return [p for p in prompts if norm(p) in keys or inside.search(norm(p))]


@functools.lru_cache(maxsize=4)
def _all(seed: int) -> tuple[str, ...]:
    from voicepipe.training import draft_prompts_spoken
    from voicepipe.training.draft_prompts import train_prompts

    old = train_prompts(OLD_SERIES)
    new = draft_prompts_spoken.series(seed)
    r = random.Random(seed)
    merged = [*old, *new]
    r.shuffle(merged)
    return tuple(_usable(merged))


def _usable(prompts: list[str]) -> list[str]:
    """``prompts`` in order, each once (normalised), without empties and without any
    that is or holds a benchmark's prompt."""
    bench = [p for ps in benchmark_prompts().values() for p in ps]
    bad = set(overlaps([p for p in prompts if p], bench))
    out, seen = [], set()
    for p in prompts:
        k = norm(p)
        if p and p not in bad and k not in seen:
            seen.add(k)
            out.append(p)
    return out


def data_prompts(n: int = 0, seed: int = 0) -> list[str]:
    """The first ``n`` prompts (0: all) of the seeded list; a prefix of a longer list."""
    got = _all(seed)
    return list(got[:n] if n else got)


def file_prompts(path: Path) -> list[str]:
    """The usable questions of a ``train draft-questions`` file (JSON lines, ``question``
    empty where the model wrote none usable), in its order, each once (normalised), none
    that is or holds a benchmark's prompt."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return _usable([json.loads(x)["question"] for x in lines if x])
