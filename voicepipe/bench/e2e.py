"""`voicepipe bench e2e`: voice-to-voice latency of the whole assistant, on real sockets.

A `voicepipe serve` process runs the pipeline on its default models; headless
clients (voicepipe.client) stream spoken questions at real time, one question
per session, and measure ``e2e.voice_to_voice`` themselves: from the end of
the user's speech (media time) to the first reply sample their playout buffer
played. Questions are spoken by the teacher voice (hibari) at run time, so no
audio ships with the benchmark. Concurrency levels 1, 2, 4, … up to
``--concurrency`` (or the levels listed: ``--concurrency 1,2,4,8,12``) run that
many sessions at once, each batch's sessions starting at seeded random offsets
within ``--stagger-ms`` (default 1 s); the largest level whose p95 stays under
1.5 s is reported. Per level (bench/e2e_levels.py): voice to voice, ``llm.ttft``
and ``llm.tpot`` p50/p95/p99, the LLM's aggregate decode rate, the share of
played audio concealed, server CPU seconds; ``--plot`` draws latency against
sessions.

Streaming prefill (``turns.prefill_ahead``): ``prefill_ahead`` sums each turn's
``llm.prefill_ahead`` span: tokens prefilled ahead of the endpoint, rolled back, the share
thrown away (``wasted_share`` = rolled back / prefilled ahead), the P(end) values seen;
``spans`` has ``llm.ttft`` p50/p95 (what was left to prefill).

Preemptive generation (``turns.preempt``): each turn's outcome (``kept``,
``cancelled`` or ``off``, from its ``llm.ttft`` span) is counted under
``preempt``. ``--compare-preempt`` measures what it saves: two servers, one
with preemption off and one with it on, asked the same questions alternately
(off, on, off, on, …) so that both see the same machine load; the JSON then
holds ``variants`` (``preempt_off``, ``preempt_on``, each a full summary) and
``saving_ms`` (off − on, p50/p95). ``--variant`` compares any config
overrides the same way (e.g. ``--variant turns.preempt_after_ms=80``), at every
concurrency level up to ``--concurrency``: each batch of that many questions is
asked of one variant, then of the next (e.g. ``--variant server.adaptive_threads=false
--variant server.adaptive_threads=true --concurrency 4``).

``--endpoint realtime`` asks through ``/v1/realtime`` with the official ``openai``
SDK's realtime client instead (bench/e2e_realtime.py); ``--endpoint both`` asks each
question through ``/ws`` and then ``/v1/realtime`` of one server and compares
``client.voice_to_first_audio`` (last speech sample sent → first reply audio
received, before any playout buffer) of the two (concurrency 1).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any

from voicepipe.bench._progress import progress
from voicepipe.bench.common import (
    QUESTIONS,  # noqa: F401 (training/draft_data_prompts.py)
    pcts,
    speak,
)
from voicepipe.bench.e2e_kinds import QUESTIONS as TAGGED_QUESTIONS
from voicepipe.bench.e2e_kinds import kinds
from voicepipe.bench.e2e_levels import (
    batches,
    level_summary,
    llm_usage,
    offsets,
    parse_levels,
    plot,
)

LIMIT_MS = 1500.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "e2e",
        help="voice-to-voice latency of the assistant over real sockets (JSON)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="3 questions, concurrency 1 only")
    p.add_argument(
        "--concurrency",
        default="1",
        help="highest concurrency level to try (1, 2, 4, … up to this), or the levels "
        "themselves: 1,2,4,8,12",
    )
    p.add_argument(
        "--stagger-ms",
        type=float,
        default=1000.0,
        help="sessions of a level start at random offsets within this window (seeded)",
    )
    p.add_argument("--plot", metavar="PNG", help="draw voice to voice against sessions here")
    p.add_argument(
        "--questions",
        type=int,
        default=len(TAGGED_QUESTIONS),
        help=f"questions per level (≤ {len(TAGGED_QUESTIONS)}; each tagged with its kind of "
        "turn, bench/e2e_kinds.py)",
    )
    p.add_argument("--pipeline", default="assistant")
    p.add_argument(
        "--compare-preempt",
        action="store_true",
        help="preemption off vs on, questions alternating between two servers (concurrency 1)",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="KEY=V[,KEY=V]",
        help="compare server variants (config overrides, repeat the flag), questions "
        "alternating between them (at each --concurrency level)",
    )
    p.add_argument(
        "--rounds", type=int, default=1, help="with variants: ask every question N times"
    )
    p.add_argument(
        "--otlp-sink",
        action="store_true",
        help="run a loopback OTLP/HTTP trace receiver for the run; a variant's "
        "trace.otlp_endpoint=sink points at it (what tracing on costs: --variant "
        "trace.otlp_endpoint=sink --variant trace.otlp_endpoint=); the spans it got in the JSON",
    )
    p.add_argument(
        "--ray",
        action="store_true",
        help="through Ray Serve's proxy (serve --ray on a one-box Ray cluster) against direct "
        "serve, same run; then a step of 2 x --concurrency sessions: the autoscaler's reaction "
        "(voicepipe/bench/e2e_ray.py)",
    )
    p.add_argument(
        "--hold", type=float, default=60.0, help="with --ray: seconds each step session stays open"
    )
    p.add_argument(
        "--ray-cpus", type=int, default=2, help="with --ray: CPUs of the Ray head (2 replicas)"
    )
    p.add_argument(
        "--ray-kill",
        action="store_true",
        help="with --ray: then two replicas, 2 x --concurrency sessions over both, one replica "
        "killed mid-reply: how its sessions closed and reconnected, the others' underruns "
        "against the same batch undisturbed",
    )
    p.add_argument(
        "--endpoint",
        choices=("ws", "realtime", "both"),
        default="ws",
        help="ask through /ws (protocol v1), /v1/realtime (the openai SDK's realtime "
        "client), or both alternately on one server, compared (concurrency 1)",
    )
    p.add_argument(
        "--api-load",
        type=int,
        default=0,
        metavar="N",
        help="ask each batch twice: alone, then while N clients keep POST "
        "/v1/chat/completions busy; compares voice to voice of the two (api_load in the JSON)",
    )
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.add_argument(
        "--trace",
        default=None,
        metavar="FILE",
        help="the server's spans (JSONL, or Chrome trace if .json); "
        "draw them with `voicepipe trace plot FILE`",
    )
    p.set_defaults(func=run)


async def _level(
    srv: Any,
    cfg: Any,
    clips: list[Any],
    texts: list[str],
    c: int,
    log: Any,
    stagger_s: float = 0.0,
    api_load: int = 0,
) -> dict[str, Any]:
    results = []
    for n, batch in enumerate(batches(len(clips), c)):
        for load in (0, api_load) if api_load else (0,):
            results += await _batch(srv, cfg, clips, texts, c, log, stagger_s, n, batch, load)
    return {"concurrency": c, "sessions": results}


async def _batch(
    srv: Any,
    cfg: Any,
    clips: list[Any],
    texts: list[str],
    c: int,
    log: Any,
    stagger_s: float,
    n: int,
    batch: list[int],
    api_load: int,
) -> list[dict[str, Any]]:
    import asyncio
    import contextlib

    from voicepipe.bench.e2e_api_load import chat_load
    from voicepipe.client import ClientSession

    async def later(s: ClientSession, delay_s: float) -> Any:
        await asyncio.sleep(delay_s)
        return await s.run()

    results = []
    sessions = [
        ClientSession(
            srv.ws_url,
            clips[i],
            16000,
            cfg,
            playout="adaptive",
            trailing_silence_s=1.5,
            timeout_s=120.0,
            index=i,
        )
        for i in batch
    ]
    delays = offsets(len(sessions), stagger_s, seed=1000 * c + n)
    load: contextlib.AbstractAsyncContextManager[dict[str, int]] = (
        chat_load(srv.host, srv.port, api_load) if api_load else contextlib.nullcontext({})
    )
    async with load as api_counts:
        res = await asyncio.gather(*(later(s, d) for s, d in zip(sessions, delays, strict=True)))
    for i, r in zip(batch, res, strict=True):
        out = r.to_json()
        out["question"] = texts[i]
        if api_load:
            out["api_load"], out["api_requests"] = api_load, dict(api_counts)
        out["preempt"] = _preempt_outcome(r.spans)
        out["prefill_ahead"] = _prefill_ahead(r.spans)
        out["tool_call"] = _tool_call(r.spans)
        out["llm"] = llm_usage(r.spans)
        results.append(out)
        log(
            f"  c={c} q{i}{' +api' if api_load else ''}: "
            f"v2v={out['latency_ms'].get('e2e.voice_to_voice', 'n/a')} ms "
            f"transcript={out['transcript']!r} reply={out['reply_text'][:60]!r}"
        )
    return results


def _preempt_outcome(spans: list[Any]) -> str | None:
    """How the (first) turn's reply came about: kept | cancelled | off (None: no reply)."""
    ttft = [s for s in spans if s.name == "llm.ttft"]
    return str(ttft[0].attrs.get("preempt", "off")) if ttft else None


def _prefill_ahead(spans: list[Any]) -> dict[str, float] | None:
    """The streaming prefill's books of the (first) turn's reply (``llm.prefill_ahead``)."""
    got = [s for s in spans if s.name == "llm.prefill_ahead"]
    if not got:
        return None
    a = got[0].attrs
    keys = ("prefilled", "rolled_back", "kept", "passes", "p_end")
    return {k: a[k] for k in keys if isinstance(a.get(k), (int, float))}


def _tool_call(spans: list[Any]) -> dict[str, float] | None:
    """The (first) tool round's call as decoded: its tokens, those forced from the tools'
    schemas, the target passes it took (``llm.tool``'s attributes)."""
    got = [s for s in spans if s.name == "llm.tool"]
    if not got:
        return None
    a = got[0].attrs
    keys = ("call_tokens", "forced_tokens", "decoded_tokens", "passes", "passes_per_call")
    return {k: a[k] for k in keys if isinstance(a.get(k), (int, float))}


def prefill_ahead_summary(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """Over a level's turns: tokens prefilled ahead of the endpoint, the share of them
    thrown away (rolled back / prefilled ahead), tokens the replies found, P(end) seen."""
    books = [s["prefill_ahead"] for s in sessions if s.get("prefill_ahead")]
    prefilled = sum(b.get("prefilled", 0) for b in books)
    rolled = sum(b.get("rolled_back", 0) for b in books)
    p_end = [b["p_end"] for b in books if b.get("p_end", -1) >= 0]
    return {
        "turns": len(books),
        "prefilled": prefilled,
        "rolled_back": rolled,
        "wasted_share": round(rolled / prefilled, 3) if prefilled else None,
        "kept": sum(b.get("kept", 0) for b in books),
        "passes": sum(b.get("passes", 0) for b in books),
        "p_end": pcts(p_end) if p_end else None,
    }


def summarize(
    levels: list[dict[str, Any]], cpu_s: float, audio_s: float, wall_s: float
) -> dict[str, Any]:
    first = levels[0]["sessions"]
    v2v = [
        s["latency_ms"]["e2e.voice_to_voice"]
        for s in first
        if "e2e.voice_to_voice" in s["latency_ms"]
    ]
    span_names = sorted({k for s in first for k in s["latency_ms"]})
    spans = {
        n: pcts([s["latency_ms"][n] for s in first if n in s["latency_ms"]]) for n in span_names
    }
    jitter: dict[str, float] = {}
    for s in first:
        for k, v in (s.get("jitter") or {}).items():
            if k in ("underruns", "concealed_ms", "accelerated_ms", "stretched_ms", "played_ms"):
                jitter[k] = round(jitter.get(k, 0.0) + float(v), 1)
    per_level = []
    best = 0
    under = True  # every level so far kept p95 under the limit with no failed session
    for lv in levels:  # increasing concurrency
        vals = [
            s["latency_ms"]["e2e.voice_to_voice"]
            for s in lv["sessions"]
            if "e2e.voice_to_voice" in s["latency_ms"]
        ]
        p = pcts(vals)
        failed = len(lv["sessions"]) - len(vals)
        per_level.append(
            {
                "concurrency": lv["concurrency"],
                "sessions": len(lv["sessions"]),
                "voice_to_voice_ms": p,
                "failed": failed,
                **level_summary(lv["sessions"], lv.get("cpu_s")),
            }
        )
        under = under and failed == 0 and bool(vals) and p["p95"] < LIMIT_MS
        if under:
            best = lv["concurrency"]
    errors = [e for lv in levels for s in lv["sessions"] for e in s.get("errors", [])]
    preempt: dict[str, int] = {}
    for s in first:
        if s.get("preempt"):
            preempt[s["preempt"]] = preempt.get(s["preempt"], 0) + 1
    from voicepipe.client import VOICE_TO_SPEECH

    heard = [s["latency_ms"][VOICE_TO_SPEECH] for s in first if VOICE_TO_SPEECH in s["latency_ms"]]
    return {
        "voice_to_voice_ms": pcts(v2v),
        # to the first audible sample (the reply's own lead-in silence after voice_to_voice)
        "voice_to_speech_ms": pcts(heard) if heard else None,
        "kinds": kinds(first),  # plain, long-first-sentence and tool turns apart
        "spans": spans,
        "jitter": jitter,
        "cpu": {
            "server_cpu_s": round(cpu_s, 2),
            "audio_in_s": round(audio_s, 2),
            "wall_s": round(wall_s, 2),
            "server_cpu_s_per_audio_s": round(cpu_s / max(audio_s, 1e-9), 3),
            "server_cores_busy": round(cpu_s / max(wall_s, 1e-9), 3),
        },
        "levels": per_level,
        "max_concurrency_p95_under_1500ms": best,
        "preempt": preempt,
        "prefill_ahead": prefill_ahead_summary(first),
        "errors": errors[:20],
        "turns": [
            {
                k: s.get(k)
                for k in (
                    "question",
                    "transcript",
                    "reply_text",
                    "latency_ms",
                    "preempt",
                    "prefill_ahead",
                    "tool_call",
                )
            }  # fmt: skip
            for s in first
        ],
    }


async def bench(
    cfg: Any,
    *,
    pipeline: str,
    n_questions: int,
    levels: list[int],
    log: Any,
    trace: str | None = None,
    stagger_s: float = 0.0,
    api_load: int = 0,
) -> dict[str, Any]:
    import asyncio
    import time

    from voicepipe.bench._serve import serve_process
    from voicepipe.bench.e2e_api_load import split_summary

    texts = TAGGED_QUESTIONS[: max(1, min(n_questions, len(TAGGED_QUESTIONS)))]
    clips = await asyncio.to_thread(speak, texts)
    log(f"bench e2e: {len(texts)} spoken questions; starting voicepipe serve ({pipeline}) …")
    async with serve_process(pipeline, cfg, trace=trace) as srv:
        done = []
        cpu0, t0 = srv.cpu_s(), time.monotonic()
        audio_s = 0.0
        for c in levels:
            c0 = srv.cpu_s()
            lv = await _level(srv, cfg, clips, texts, c, log, stagger_s, api_load)
            lv["cpu_s"] = srv.cpu_s() - c0
            done.append(lv)
            audio_s += sum(s["input_audio_s"] for s in lv["sessions"])
        cpu_s, wall_s = srv.cpu_s() - cpu0, time.monotonic() - t0
    out = summarize(done, cpu_s, audio_s, wall_s)
    out["pipeline"] = pipeline
    out["questions"] = len(texts)
    if api_load:
        out["api_load"] = {
            "clients": api_load,
            **split_summary([s for lv in done for s in lv["sessions"]]),
        }
    return out


async def compare(
    cfg: Any,
    variants: dict[str, list[str]],
    *,
    pipeline: str,
    n_questions: int,
    rounds: int,
    log: Any,
    trace: str | None = None,
    levels: list[int] | None = None,
    stagger_s: float = 0.0,
    api_load: int = 0,
) -> dict[str, Any]:
    """One server per variant (config overrides on top of ``cfg``), asked the same questions
    in turn (at each concurrency level 1, 2, 4, … up to ``max_c``: the level's first
    batch of questions of each variant, its second of each, …, ``rounds`` times), so that
    every variant sees the same machine load. The trace, if any, is the last variant's."""
    import asyncio
    import time

    from voicepipe.bench._serve import serve_variants

    texts = TAGGED_QUESTIONS[: max(1, min(n_questions, len(TAGGED_QUESTIONS)))]
    clips = await asyncio.to_thread(speak, texts)
    names = list(variants)
    levels = levels or [1]
    log(f"bench e2e: {len(texts)} spoken questions × {rounds}, variants {names}, alternating …")
    async with serve_variants(pipeline, cfg, variants, trace) as servers:
        sessions: dict[str, dict[int, list[dict[str, Any]]]] = {
            m: {c: [] for c in levels} for m in names
        }
        cpu = {m: dict.fromkeys(levels, 0.0) for m in names}
        wall = dict.fromkeys(names, 0.0)
        for c in levels:
            for _ in range(rounds):
                for i in range(0, len(clips), c):
                    for name in names:
                        srv = servers[name]
                        cpu0, t0 = srv.cpu_s(), time.monotonic()
                        lv = await _level(
                            srv,
                            cfg,
                            clips[i : i + c],
                            texts[i : i + c],
                            c,
                            log,
                            stagger_s,
                            api_load,
                        )
                        cpu[name][c] += srv.cpu_s() - cpu0
                        wall[name] += time.monotonic() - t0
                        sessions[name][c] += lv["sessions"]
    audio_s = sum(s["input_audio_s"] for c in levels for s in sessions[names[0]][c])
    out: dict[str, Any] = {
        "pipeline": pipeline,
        "questions": len(texts),
        "rounds": rounds,
        "order": "each batch of questions asked of every variant in turn",
        "variants": {n: {"overrides": variants[n]} for n in names},
    }
    for name in names:
        lvs = [
            {"concurrency": c, "sessions": sessions[name][c], "cpu_s": cpu[name][c]} for c in levels
        ]
        total = sum(cpu[name].values())
        out["variants"][name].update(summarize(lvs, total, audio_s, wall[name]))
        if api_load:
            from voicepipe.bench.e2e_api_load import split_summary

            every = [s for c in levels for s in sessions[name][c]]
            out["variants"][name]["api_load"] = {"clients": api_load, **split_summary(every)}
    return out


async def endpoints(
    cfg: Any, *, pipeline: str, n_questions: int, rounds: int, which: str, log: Any
) -> dict[str, Any]:
    """Each question through ``/ws`` and/or ``/v1/realtime`` of one server, in turn."""
    import asyncio

    import numpy as np

    from voicepipe.audio import resample
    from voicepipe.bench._serve import serve_process
    from voicepipe.bench.e2e_realtime import ask, endpoint_summary
    from voicepipe.client import VOICE_TO_FIRST_AUDIO

    names = ["ws", "realtime"] if which == "both" else [which]
    texts = TAGGED_QUESTIONS[: max(1, min(n_questions, len(TAGGED_QUESTIONS)))]
    clips = await asyncio.to_thread(speak, texts)
    log(f"bench e2e: {len(texts)} spoken questions × {rounds} through {' and '.join(names)} …")
    sessions: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    async with serve_process(pipeline, cfg) as srv:
        for _ in range(rounds):
            for i, clip in enumerate(clips):
                for name in names:
                    if name == "ws":
                        lv = await _level(srv, cfg, [clip], texts[i : i + 1], 1, log)
                        sessions[name] += lv["sessions"]
                        continue
                    out = await ask(srv.port, resample(clip, 16000, 24000))
                    out["question"] = texts[i]
                    sessions[name].append(out)
                    log(
                        f"  realtime q{i}: {out['latency_ms']} "
                        f"transcript={out['transcript']!r} reply={out['reply_text'][:60]!r}"
                    )
    result: dict[str, Any] = {
        "pipeline": pipeline,
        "questions": len(texts),
        "rounds": rounds,
        "metric": VOICE_TO_FIRST_AUDIO,
        "endpoints": {n: endpoint_summary(sessions[n]) for n in names},
        "sessions": sessions,
    }
    if "ws" in sessions:
        v2v = summarize([{"concurrency": 1, "sessions": sessions["ws"]}], 0.0, 1.0, 1.0)
        result["endpoints"]["ws"]["voice_to_voice_ms"] = v2v["voice_to_voice_ms"]
    if which == "both":
        ws = result["endpoints"]["ws"][VOICE_TO_FIRST_AUDIO]
        rt = result["endpoints"]["realtime"][VOICE_TO_FIRST_AUDIO]
        result["realtime_over_ws"] = {
            q: round(rt[q] / ws[q], 3) for q in ("p50", "p95") if q in ws and q in rt and ws[q]
        }
        # Each question asked through both endpoints back to back: the median of those
        # pairs' ratios is steadier under a shared machine's load than a ratio of p50s.
        pairs = [
            b["latency_ms"][VOICE_TO_FIRST_AUDIO] / a["latency_ms"][VOICE_TO_FIRST_AUDIO]
            for a, b in zip(sessions["ws"], sessions["realtime"], strict=True)
            if VOICE_TO_FIRST_AUDIO in a["latency_ms"] and VOICE_TO_FIRST_AUDIO in b["latency_ms"]
        ]
        if pairs:
            result["realtime_over_ws"]["paired_median"] = round(float(np.median(pairs)), 3)
    return result


async def compare_preempt(cfg: Any, **kw: Any) -> dict[str, Any]:
    """Preemption off vs on (with ``cfg``'s other settings): what it saves."""
    out = await compare(
        cfg, {"preempt_off": ["turns.preempt=false"], "preempt_on": ["turns.preempt=true"]}, **kw
    )
    off = out["variants"]["preempt_off"]["voice_to_voice_ms"]
    on = out["variants"]["preempt_on"]["voice_to_voice_ms"]
    out["saving_ms"] = {q: round(off[q] - on[q], 1) for q in ("p50", "p95") if q in off and q in on}
    return out


def run(args: argparse.Namespace) -> int:
    import asyncio

    n = 3 if args.quick else args.questions
    try:
        levels = [1] if args.quick else parse_levels(args.concurrency)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    max_c = levels[-1]
    stagger_s = max(0.0, args.stagger_ms) / 1000
    if args.otlp_sink and not any("trace.otlp_endpoint=sink" in v for v in args.variant):
        raise SystemExit("bench e2e: --otlp-sink: no --variant sets trace.otlp_endpoint=sink")
    log = progress(args)
    if max_c > args.config.server.max_sessions:  # measuring load, not admission
        from voicepipe.config import apply_overrides

        args.config = apply_overrides(args.config, [f"server.max_sessions={max_c}"])
        log(f"bench e2e: server.max_sessions raised to {max_c} for the {max_c}-session level")
    if args.api_load > args.config.server.max_sessions:
        # The API queues at most server.max_sessions requests (then 429): all N must be
        # queued, as N concurrent clients are, not retrying 429s in a loop.
        from voicepipe.config import apply_overrides

        args.config = apply_overrides(args.config, [f"server.max_sessions={args.api_load}"])
        log(f"bench e2e: server.max_sessions raised to {args.api_load} for --api-load")

    if args.ray:
        from voicepipe.bench import e2e_ray

        out = asyncio.run(
            e2e_ray.bench(
                args.config,
                pipeline=args.pipeline,
                n_questions=n,
                max_c=max_c,
                hold_s=args.hold,
                ray_cpus=args.ray_cpus,
                log=log,
                kill=args.ray_kill,
            )
        )
        print(json.dumps(out, indent=None if args.json else 2))
        kill = out.get("kill", {})
        lost = [v for v in kill.get("victims", []) if not (v["reconnected"] and v["finished"])]
        ok = not lost and all(s["finished"] for s in kill.get("survivors", []))
        return 0 if out["levels"] and not out["step"]["dropped"] and ok else 1
    if args.endpoint != "ws":
        res = asyncio.run(
            endpoints(
                args.config,
                pipeline=args.pipeline,
                n_questions=n,
                rounds=max(1, args.rounds),
                which=args.endpoint,
                log=log,
            )
        )
        print(json.dumps(res, indent=None if args.json else 2))
        return 0 if all(e["n"] for e in res["endpoints"].values()) else 1
    if args.compare_preempt or args.variant:
        kw = dict(
            pipeline=args.pipeline,
            n_questions=n,
            rounds=max(1, args.rounds),
            log=log,
            trace=args.trace,
            levels=levels,
            stagger_s=stagger_s,
            api_load=args.api_load,
        )
        if args.compare_preempt:
            out = asyncio.run(compare_preempt(args.config, **kw))
        else:
            from voicepipe.bench._serve import parse_variants

            variants = parse_variants(args.variant, args.config)
            with contextlib.ExitStack() as stack:
                if args.otlp_sink:
                    from voicepipe.bench.otlp_sink import OtlpSink, with_sink

                    sink = stack.enter_context(OtlpSink())
                    variants = {k: with_sink(v, sink.url) for k, v in variants.items()}
                out = asyncio.run(compare(args.config, variants, **kw))
                if args.otlp_sink:
                    out["otlp_sink"] = {"requests": len(sink.requests), "spans": sink.spans()}
        _plot(args, out, log)
        print(json.dumps(out, indent=None if args.json else 2))
        return 0 if all(v["voice_to_voice_ms"] for v in out["variants"].values()) else 1
    out = asyncio.run(
        bench(
            args.config,
            pipeline=args.pipeline,
            n_questions=n,
            levels=levels,
            log=log,
            trace=args.trace,
            stagger_s=stagger_s,
            api_load=args.api_load,
        )
    )
    _plot(args, out, log)
    print(json.dumps(out, indent=None if args.json else 2))
    return 0 if out["voice_to_voice_ms"] else 1


def _plot(args: argparse.Namespace, out: dict[str, Any], log: Any) -> None:
    if args.plot:
        plot(out, args.plot)
        log(f"plot: {args.plot}")
