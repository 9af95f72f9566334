"""`bench e2e`'s questions, each tagged with the kind of turn it makes, and the per-kind report.

Kinds (what the turn costs before the first spoken chunk):

- ``plain``: an ordinary question whose reply opens with a short clause;
- ``long_first``: a reply whose first sentence is long and carries no clause mark for
  many words ("The moon is approximately 384,400 kilometers away from Earth."): the
  first chunk waits on the chunker's phrase breaks (core/text/chunker.py);
- ``tool``: a request the built-in tools serve (a timer, the time, arithmetic): the
  call's decode, the tool, then its answer (voicepipe/tools.py).

The kind is the question's, not measured from the reply: a reply that goes another way
(a model that answers arithmetic without the calculator) still counts under its tag, so
the same questions compare across branches. The first eight are ``common.QUESTIONS``
(what `bench e2e` asked before kinds), in order, so ``--questions 8`` asks those.
"""

from __future__ import annotations

from typing import Any

from voicepipe.bench.common import QUESTIONS as COMMON
from voicepipe.bench.common import pcts

KINDS = ("plain", "long_first", "tool")
TAGGED: tuple[tuple[str, str], ...] = (
    *((q, "tool" if q == "What is two plus three?" else "plain") for q in COMMON),
    ("How far away is the moon?", "long_first"),
    ("How long is the Great Wall of China?", "long_first"),
    ("How fast does light travel?", "long_first"),
    ("Set a timer for ten minutes.", "tool"),
    ("What is 12 times 15?", "tool"),
    ("What time is it?", "tool"),
)
QUESTIONS = [q for q, _ in TAGGED]
KIND_OF = dict(TAGGED)
_SPANS = ("client.voice_to_speech", "llm.ttft", "llm.first_chunk", "llm.tool")


def kinds(sessions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kind of turn: how many sessions, voice to voice p50/p95/p99 and the spans that
    tell the kinds apart (``llm.ttft``, ``llm.first_chunk``, ``llm.tool``), over the
    sessions of one level (each has ``question`` and ``latency_ms``)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        mine = [s for s in sessions if KIND_OF.get(s.get("question", "")) == kind]
        if not mine:
            continue
        row: dict[str, Any] = {
            "sessions": len(mine),
            "voice_to_voice_ms": pcts(
                [s["latency_ms"]["e2e.voice_to_voice"] for s in mine
                 if "e2e.voice_to_voice" in s["latency_ms"]]
            ),
        }  # fmt: skip
        for name in _SPANS:
            vals = [s["latency_ms"][name] for s in mine if name in s["latency_ms"]]
            if vals:
                row[name] = pcts(vals)
        calls = [s["tool_call"] for s in mine if s.get("tool_call")]
        if calls:  # the calls as decoded: forced tokens (jump-forward) against decoded
            tot = {
                k: sum(c.get(k, 0) for c in calls)
                for k in ("forced_tokens", "decoded_tokens", "passes")
            }
            per_call = round(tot["passes"] / len(calls), 2)
            row["tool_calls"] = {"calls": len(calls), **tot, "passes_per_call": per_call}
        out[kind] = row
    return out
