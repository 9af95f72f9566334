"""`bench e2e`'s tagged questions and its per-kind report."""

from __future__ import annotations

from voicepipe.bench import e2e
from voicepipe.bench.common import QUESTIONS as COMMON
from voicepipe.bench.e2e_kinds import KIND_OF, KINDS, QUESTIONS, kinds


def test_every_question_has_a_kind_and_the_old_eight_come_first() -> None:
    assert QUESTIONS[: len(COMMON)] == COMMON  # --questions 8 asks what was asked before
    assert set(KIND_OF.values()) == set(KINDS)
    assert len(set(QUESTIONS)) == len(QUESTIONS)
    assert KIND_OF["What is two plus three?"] == "tool"


def _session(q: str, v2v: float | None, **spans: float) -> dict:
    lat = dict(spans)
    if v2v is not None:
        lat["e2e.voice_to_voice"] = v2v
    return {"question": q, "latency_ms": lat}


def test_kinds_split_the_sessions_and_their_spans() -> None:
    sessions = [
        _session("What is the capital of France?", 900.0, **{"llm.first_chunk": 400.0}),
        _session("Why is the sky blue?", 1100.0, **{"llm.first_chunk": 500.0}),
        _session("How far away is the moon?", 1300.0, **{"llm.first_chunk": 600.0}),
        _session("Set a timer for ten minutes.", 1500.0, **{"llm.tool": 700.0}),
        _session("What time is it?", None),  # failed: counted, no latency
        _session("Not in the set?", 5.0),
    ]
    got = kinds(sessions)
    assert list(got) == ["plain", "long_first", "tool"]
    assert got["plain"]["sessions"] == 2
    assert got["plain"]["voice_to_voice_ms"]["p50"] == 1000.0
    assert got["plain"]["llm.first_chunk"]["p50"] == 450.0
    assert "llm.tool" not in got["plain"]
    assert got["long_first"]["voice_to_voice_ms"]["p50"] == 1300.0
    assert got["tool"]["sessions"] == 2 and got["tool"]["llm.tool"]["p50"] == 700.0
    assert got["tool"]["voice_to_voice_ms"]["p50"] == 1500.0
    # The whole summary carries them, beside the overall figures.
    out = e2e.summarize([{"concurrency": 1, "sessions": sessions}], 1.0, 1.0, 1.0)
    assert out["kinds"] == got


def test_tool_turns_carry_how_their_calls_were_decoded() -> None:
    from voicepipe.tracing import SpanRecord

    attrs = {"call_tokens": 23, "forced_tokens": 11, "decoded_tokens": 12, "passes": 7,
             "passes_per_call": 7.0, "tool": "calculate"}  # fmt: skip
    call = e2e._tool_call([SpanRecord("llm.tool", 0, 1, 1, "s", attrs)])
    assert call == {k: v for k, v in attrs.items() if k != "tool"}
    assert e2e._tool_call([]) is None
    timer = {**_session("Set a timer for ten minutes.", 1500.0), "tool_call": call}
    clock = {**_session("What time is it?", 900.0), "tool_call": {**call, "passes": 3}}
    got = kinds([timer, clock, _session("Why is the sky blue?", 800.0)])
    assert got["tool"]["tool_calls"] == {
        "calls": 2, "forced_tokens": 22, "decoded_tokens": 24, "passes": 10,
        "passes_per_call": 5.0,
    }  # fmt: skip
    assert "tool_calls" not in got["plain"]
