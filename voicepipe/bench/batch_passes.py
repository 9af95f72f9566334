"""`bench batch`'s decode passes: what one batched step of N sessions costs the model.

The closed loop (voicepipe/bench/batch.py) measures replies, prompts and drafting
included. This part isolates the kernel: N sessions, each with a real prompt in its
cache (the configured system prompt from the prefix cache, then a question), decode
one token each in one batched pass (``nn.batched.score_batch``), again and again at
the same positions; the median pass time gives the aggregate decode rate of N
sessions that all have a reply in flight (N tokens per pass) against one session's.
Each level is timed with the shared system-prompt rows read once per pass and with
every session reading its own copy, alternating, so the two compare in one run.
"""

from __future__ import annotations

import statistics
import time
from typing import Any


def _median_ms(run: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1000.0, 1)


async def decode_passes(
    cfg: Any, engine: Any, levels: list[int], qs: list[str], repeats: int = 9
) -> list[dict[str, Any]]:
    """Per level: the median batched one-token decode pass (ms), with and without the
    shared prefix, and the aggregate tokens per second that makes (``qs``: the level's
    questions, whose prompts fill the sessions' caches)."""
    from voicepipe.nn.llm.batched import Pass, score_batch
    from voicepipe.stages.llm.local import LocalEngine
    from voicepipe.stages.llm.stage import LlmStage

    forks = []
    for i in range(max(levels)):
        st = LlmStage(cfg, engine.fork())
        await st.start()  # the system prompt's rows, from the prefix cache
        eng: Any = st.engine
        assert isinstance(st.backend, LocalEngine)
        eng.target.prefill(st.backend.prompt(qs[i % len(qs)]))  # the stage's real prompt
        forks.append(eng.target)
    model = forks[0].model

    def one(n: int, share: bool) -> None:
        passes = [Pass(t, [t.fed[-1]]) for t in forks[:n]]
        score_batch(model, passes, share_prefixes=share)
        for t in forks[:n]:
            t.rollback(t.length - 1)  # back to the same position for the next pass

    out = []
    for n in levels:
        one(n, True)  # warm
        ms = {}
        for share in (True, False) if n % 2 else (False, True):  # alternate which goes first
            ms["shared" if share else "own"] = _median_ms(lambda s=share, k=n: one(k, s), repeats)
        out.append(
            {
                "sessions": n,
                "pass_ms": ms["shared"],
                "pass_ms_own_prefix": ms["own"],
                "tok_s": round(n / ms["shared"] * 1000.0, 1),
            }
        )
    for row in out:
        row["vs_one_session"] = round(row["tok_s"] / out[0]["tok_s"], 2)
    return out
