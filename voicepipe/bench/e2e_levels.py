"""`voicepipe bench e2e` under load: the concurrency levels, staggered starts, per-level figures.

``--concurrency`` is a highest level (``8``: 1, 2, 4, 8) or a list (``1,2,4,8,12``). A
level of c sessions asks its questions c at a time; with more sessions than
questions, questions repeat. Sessions of a batch start at seeded random offsets
within ``--stagger-ms`` (realistic load: people do not all stop talking in the same
millisecond), and the questions differ in length and so do the replies.

Per level (``level_summary``): voice to voice p50/p95/p99, ``llm.ttft`` and
``llm.tpot`` p50/p95/p99, the LLM's aggregate rate (every session's reply tokens
over the time any session was decoding: the union of their [first-token request,
last token] windows; a reply's decoding also waits while the TTS's queue is full,
so this is the rate the pipeline delivered, not the LLM's capacity, which
`voicepipe bench batch` measures alone), the share of played audio the clients'
playout concealed, and the server's CPU seconds in the level. ``plot``
draws voice to voice against sessions (PNG).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def parse_levels(spec: str | int) -> list[int]:
    """``"8"`` → [1, 2, 4, 8]; ``"1,2,4,8,12"`` → those (sorted, distinct, ≥ 1)."""
    text = str(spec).strip()
    if "," not in text:
        top = int(text)
        if top < 1:
            raise ValueError(f"--concurrency {spec!r}: a level is at least 1")
        out, c = [], 1
        while c <= top:
            out.append(c)
            c *= 2
        if out[-1] != top:
            out.append(top)
        return out
    levels = sorted({int(x) for x in text.split(",") if x.strip()})
    if not levels or levels[0] < 1:
        raise ValueError(f"--concurrency {spec!r}: levels are integers ≥ 1, e.g. 1,2,4,8,12")
    return levels


def batches(n_clips: int, c: int) -> list[list[int]]:
    """The clip indices a level of ``c`` sessions asks, ``c`` at a time: every clip at
    least once, the last batch (or the only one, when ``c`` > ``n_clips``) filled up
    from the start."""
    out = []
    for start in range(0, n_clips, c):
        out.append([(start + j) % n_clips for j in range(c)])
    return out


def offsets(n: int, stagger_s: float, seed: int) -> list[float]:
    """Start offsets (s) of a batch's ``n`` sessions: seeded, uniform in [0, stagger_s),
    the first at 0."""
    if n <= 1 or stagger_s <= 0:
        return [0.0] * n
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, stagger_s, n)
    x[0] = 0.0
    return [float(v) for v in x]


def llm_usage(spans: list[Any]) -> dict[str, Any]:
    """A session's reply tokens and decoding windows [start, end] (ms, server clock):
    from each turn's ``llm.ttft`` start to its last token (ttft + ``decode_ms``)."""
    ttft = {s.turn_id: s for s in spans if s.name == "llm.ttft"}
    tokens, windows = 0, []
    for s in spans:
        if s.name != "llm.tpot":
            continue
        tokens += int(s.attrs.get("tokens", 0))
        t = ttft.get(s.turn_id)
        if t is not None:
            end = t.end_ns / 1e6 + float(s.attrs.get("decode_ms", 0.0))
            windows.append([t.start_ns / 1e6, end])
    return {"tokens": tokens, "windows_ms": windows}


def union_ms(windows: list[list[float]]) -> float:
    """Length of the union of [start, end] intervals."""
    total, end = 0.0, None
    for a, b in sorted(windows):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def level_summary(sessions: list[dict[str, Any]], cpu_s: float | None = None) -> dict[str, Any]:
    from voicepipe.bench.common import pcts

    def ms(name: str) -> list[float]:
        return [s["latency_ms"][name] for s in sessions if name in s["latency_ms"]]

    tokens = sum(s.get("llm", {}).get("tokens", 0) for s in sessions)
    busy = union_ms([w for s in sessions for w in s.get("llm", {}).get("windows_ms", [])])
    played = sum(float((s.get("jitter") or {}).get("played_ms", 0.0)) for s in sessions)
    concealed = sum(float((s.get("jitter") or {}).get("concealed_ms", 0.0)) for s in sessions)
    out: dict[str, Any] = {
        "ttft_ms": pcts(ms("llm.ttft")),
        "tpot_ms": pcts(ms("llm.tpot")),
        "llm_tokens": tokens,
        "llm_tok_s": round(tokens / (busy / 1000), 1) if busy > 0 else None,
        "concealed_pct": round(100 * concealed / played, 2) if played > 0 else None,
    }
    if cpu_s is not None:
        out["server_cpu_s"] = round(cpu_s, 2)
    return out


def plot(result: dict[str, Any], path: str) -> None:
    """Voice to voice p50/p95/p99 against sessions, one line style per variant (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result.get("variants") or {"": result}
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (name, r) in enumerate(runs.items()):
        lv = [x for x in r["levels"] if x["voice_to_voice_ms"]]
        xs = [x["concurrency"] for x in lv]
        for q, style in (("p50", "-o"), ("p95", "--s"), ("p99", ":^")):
            ys = [x["voice_to_voice_ms"][q] for x in lv]
            label = f"{name} {q}".strip()
            ax.plot(xs, ys, style, color=f"C{i}", label=label)
    ax.axhline(1500, color="grey", lw=0.8)
    ax.text(ax.get_xlim()[0], 1520, " 1.5 s", color="grey", fontsize=8)
    ax.set_xlabel("concurrent sessions")
    ax.set_ylabel("voice to voice (ms)")
    ax.set_title(f"voicepipe bench e2e ({result.get('pipeline', '')})")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
