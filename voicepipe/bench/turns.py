"""`voicepipe bench turns`: turn-taking as a user hears it, on the real server.

A `voicepipe serve` process on loopback (bench/_serve.py) and the headless client, in
real time, one session per situation, from the committed set of spoken situations
(bench/turns_set.py: espeak-ng voices, noise at an SNR; half the sessions at 48 kHz in
and out, half at 16 kHz):

- **complete** turns: a whole request. ``eot_delay_ms``: the silence before the turn is
  committed, from the arrival of the last speech sample to the final transcript (the
  ``asr.final`` span's ``since_speech_end_ms``), p50 / p95.
- **paused** turns: a request with 400–1,500 ms pauses inside. ``false_cutoff_rate``:
  the share of them the server split into more than one turn (more than one answered
  turn, or more than one final transcript: a later part dropped as a backchannel counts).
- **backchannel**: a long answer is asked for; after 1 s of it has played the user says
  "mm-hmm", "yeah", "right", "okay" or coughs. ``false_barge_in_rate``: the share where
  the answer was cut or the backchannel was answered as a turn of its own.
- **interruption**: the same, with "wait, stop", "no, I meant Spain" …
  ``detected_rate`` (the answer was cut), ``delay_ms`` (the barge-in's first sample sent
  → the client got the ``interrupt``: the verdict), ``within_400ms_rate``; ``stop_ms``
  (the barge-in's first sample → the end of the last 10 ms in which the client's speaker
  played some of the answer that was cut: paused at the onset, ``turns.pause_on_speech``,
  it stops there), ``stopped_within_400ms_rate``. For backchannels, ``unplayed_ms``: audio
  of an answer that went on that the speaker never played (0: it resumed where it
  stopped).
- **echo**: the answer plays through a simulated speakerphone (core/playout/room.py:
  gain, path delay, a synthetic room response) back into the mic, the user silent
  (``self_interruption_rate``, ``echo_turns``: turns of the assistant's own words that
  were answered) or talking over it after 1.5 s (``detected_rate`` as above).

Each situation runs under ``--mode before`` (``turns.backchannel=false``: barge-in on
speech onset alone, as the server did before the overlap judge) and ``after`` (the
judge, core/turns/overlap.py), on the same server config otherwise. The LLM's words do
not matter here: run it with ``--config configs/fast.toml`` (the 135M); replies are capped
at ``--reply-tokens``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from typing import Any

import numpy as np

from voicepipe.cli import add_config_arg

ECHO_PATHS = (  # (gain dB, path delay ms, user talks over it)
    (-10.0, 50.0, False),
    (-6.0, 30.0, False),
    (-20.0, 120.0, False),
    (-10.0, 50.0, True),
)
BARGE_AFTER_S = 1.0  # of the answer played before the backchannel or interruption
ECHO_BARGE_AFTER_S = 1.5
WITHIN_MS = 400.0
FINAL_ATTRS = ("since_speech_end_ms", "decode_ms", "endpoint", "early", "text")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "turns",
        help="turn-taking on the real server: cut-offs, backchannels, interruptions, echo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_arg(p)
    p.add_argument(
        "--mode",
        choices=("before", "after", "both"),
        default="both",
        help="before: barge-in on speech onset (turns.backchannel=false); after: the "
        "overlap judge; both (default)",
    )
    p.add_argument(
        "--kind",
        action="append",
        choices=("complete", "paused", "backchannel", "interruption", "echo"),
        help="only these situations (repeatable; default: all)",
    )
    p.add_argument(
        "--set",
        dest="clip_set",
        choices=("bench", "tuning"),
        default="bench",
        help="bench: the reported set (bench/turns_set.py); tuning: other sentences and "
        "voices, complete and paused only (bench/turns_tuning.py), to choose numbers on",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="KEY=V[,KEY=V]",
        help="compare server variants (config overrides, repeat the flag; an empty value "
        "is allowed: --variant turns.p_end_model=): one server each, up at once, every "
        "situation played to each in turn",
    )
    p.add_argument("--reply-tokens", type=int, default=32, help="llm.max_new_tokens (default 32)")
    p.add_argument("--json", action="store_true", help="print JSON (default: a summary)")
    p.set_defaults(func=run)


def _pct(xs: list[float], q: float) -> float | None:
    return round(float(np.percentile(xs, q)), 1) if xs else None


def _rate(hits: int, n: int) -> float | None:
    return round(hits / n, 3) if n else None


def _split(row: dict[str, Any]) -> bool:
    """The server made more than one turn of the spoken request: more than one answered
    turn, or more than one final transcript with words (a later part of the request can be
    ended as a turn of its own and then dropped: heard over the reply to the first part,
    the overlap judge may call it a backchannel or echo, and it is never answered)."""
    ended = sum(bool(f.get("text")) for f in row.get("finals", []))
    return bool(row["turns"] > 1 or ended > 1)


def _answered(res: Any) -> list[Any]:
    """The session's turns that had a final transcript, in order."""
    return [t for _, t in sorted(res.turns.items()) if t.transcript]


async def _session(
    url: str,
    cfg: Any,
    pcm: np.ndarray,
    rate: int,
    *,
    barge: np.ndarray | None = None,
    barge_after_s: float = BARGE_AFTER_S,
    echo: tuple[float, float] | None = None,
) -> Any:
    from voicepipe.audio import resample
    from voicepipe.client import ClientSession
    from voicepipe.core.playout.room import EchoPath, room_ir

    path = None
    if echo is not None:
        path = EchoPath(
            gain_db=echo[0], delay_ms=echo[1], in_rate=rate, out_rate=rate, ir=room_ir(rate)
        )
    client = ClientSession(
        url,
        resample(pcm, 16000, rate),
        rate,
        cfg,
        output_sample_rate=rate,
        trailing_silence_s=1.5,
        timeout_s=60.0,
        barge_in=None if barge is None else resample(barge, 16000, rate),
        barge_in_after_s=barge_after_s,
        echo=path,
    )
    return await client.run()


def _overlap(res: Any, first: int) -> dict[str, Any]:
    """What became of the first answer when the user spoke over it."""
    turns = _answered(res)
    reply = res.turns.get(first)
    later = [t for t in turns if t.turn_id > first]
    # (an interrupt before the barge-in began was the echo's, not the user's)
    began = res.barge_in_ns if res.barge_in_ns is not None else 0
    cut = [at for t, at in res.interrupts if t > first and at >= began]
    delay = stop = unplayed = None
    if cut and res.barge_in_ns is not None:
        delay = round((cut[0] - res.barge_in_ns) / 1e6, 1)
    if reply is not None and reply.interrupted and res.barge_in_ns is not None:
        # The last sound of the cut reply: paused at the onset, it stopped there.
        if reply.last_play_ns is not None:
            stop = round(max(0, reply.last_play_ns - res.barge_in_ns) / 1e6, 1)
    if reply is not None and not reply.interrupted and res.output_sample_rate:
        # A reply that went on: what it sent and the speaker never played (0: resumed
        # where it stopped, nothing lost)
        received = sum(len(x) for x in reply.frames.values())
        unplayed = round(max(0, received - reply.played_samples) * 1e3 / res.output_sample_rate)
    return {
        "interrupted": bool(reply is not None and reply.interrupted),
        "interrupt_ms": delay,
        "stop_ms": stop,
        "unplayed_ms": unplayed,
        "later_turns": [t.transcript for t in later],
        "answered_later": sum(1 for t in later if t.reply_text.strip()),
        "reply": reply.reply_text if reply is not None else "",
        "verdicts": [
            [s.attrs.get("verdict"), s.attrs.get("text", "")]
            for s in res.spans
            if s.name == "turns.overlap"
        ],
        "error": res.error,
    }


async def _run_mode(
    cfg: Any,
    kinds: set[str],
    log: Any,
    clip_set: str = "bench",
    variants: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """One server (or one per variant: config overrides on top of ``cfg``, every server up
    at once, each situation played to each variant in turn, so all see the same load)."""
    from voicepipe.bench import turns_set, turns_tuning
    from voicepipe.bench._serve import serve_variants

    clips = (turns_tuning if clip_set == "tuning" else turns_set).load()
    by_kind: dict[str, list[Any]] = {}
    for c in clips:
        by_kind.setdefault(c.kind, []).append(c)
    missing = sorted(k for k in kinds if k not in by_kind and k != "echo")
    if missing or ("question" not in by_kind and kinds - {"complete", "paused"}):
        raise SystemExit(
            f"bench turns: the {clip_set} set has no {', '.join(missing) or 'echo'} clips"
        )
    question = by_kind["question"][0] if "question" in by_kind else None
    rows: list[dict[str, Any]] = []
    names = list(variants or {"": []})
    async with serve_variants("assistant", cfg, variants or {"": []}) as servers:
        urls = {name: srv.ws_url for name, srv in servers.items()}
        k = 0
        # each situation to every variant, the order alternating (A B, B A, …): neither
        # always plays right after the other's session
        situations = [
            (kind, c)
            for kind in ("complete", "paused", "backchannel", "interruption")
            if kind in kinds
            for c in by_kind[kind]
        ]
        plays = [
            (kind, c, name)
            for i, (kind, c) in enumerate(situations)
            for name in (names if i % 2 == 0 else names[::-1])
        ]
        for kind, c, name in plays:
            url = urls[name]
            rate = 48000 if (k // len(names)) % 2 else 16000
            k += 1
            t0 = time.perf_counter()
            if kind in ("complete", "paused"):
                res = await _session(url, cfg, c.pcm, rate)
                turns = _answered(res)
                eot = [
                    float(s.attrs["since_speech_end_ms"])
                    for s in res.spans
                    if s.name == "asr.final" and "since_speech_end_ms" in s.attrs
                ]
                row = {
                    "turns": len(turns),
                    "transcripts": [t.transcript for t in turns],
                    "eot_delay_ms": eot,
                    # each pause: its decode, transcript, P(end), and how it ended
                    # (core/turns/pauses.py); each final: its decode, endpoint reason
                    "pauses": [dict(s.attrs) for s in res.spans if s.name == "turns.pause"],
                    # each pause's estimate: queued, the background pass, its own pass
                    "p_end": [
                        {"ms": round(s.end_ns / 1e6 - s.start_ns / 1e6, 1), **s.attrs}
                        for s in res.spans
                        if s.name == "turns.p_end"
                    ],
                    "finals": [
                        {k: s.attrs.get(k) for k in FINAL_ATTRS}
                        for s in res.spans
                        if s.name == "asr.final"
                    ],
                    "error": res.error,
                }
            else:
                assert question is not None
                res = await _session(url, cfg, question.pcm, rate, barge=c.pcm)
                first = min((t.turn_id for t in _answered(res)), default=1)
                row = _overlap(res, first)
            rows.append(
                {"kind": kind, "clip": c.name, "text": c.text, "rate": rate, **row}
                | ({"variant": name} if variants else {})
            )
            log(f"  {kind:<13}{c.name:<15}{rate:>6} Hz {time.perf_counter() - t0:5.1f} s"
                + (f"  [{name}]" if variants else ""))  # fmt: skip
        if "echo" in kinds:
            assert question is not None
            talk = by_kind["interruption"][0]
            for i, (gain, delay_ms, over), name in (
                (i, e, n) for i, e in enumerate(ECHO_PATHS) for n in names
            ):
                url = urls[name]
                rate = 48000 if i % 2 else 16000
                t0 = time.perf_counter()
                res = await _session(
                    url,
                    cfg,
                    question.pcm,
                    rate,
                    barge=talk.pcm if over else None,
                    barge_after_s=ECHO_BARGE_AFTER_S,
                    echo=(gain, delay_ms),
                )
                first = min((t.turn_id for t in _answered(res)), default=1)
                row = _overlap(res, first)
                row |= {"gain_db": gain, "delay_ms": delay_ms, "user_talks": over}
                row |= {"variant": name} if variants else {}
                rows.append({"kind": "echo", "clip": question.name, "rate": rate, **row})
                log(f"  echo {gain:+.0f} dB {delay_ms:.0f} ms{' +user' if over else '':<7}"
                    f"{rate:>6} Hz {time.perf_counter() - t0:5.1f} s")  # fmt: skip
    if not variants:
        return {"summary": summarize(rows), "rows": rows}
    return {
        "order": "each situation played to every variant in turn, all servers up at once",
        "variants": {
            n: {
                "overrides": variants[n],
                "summary": summarize([r for r in rows if r["variant"] == n]),
            }
            for n in names
        },
        "rows": rows,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def of(kind: str, **match: Any) -> list[dict[str, Any]]:
        return [
            r for r in rows if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())
        ]

    out: dict[str, Any] = {}
    complete = of("complete")
    if complete:
        eot = [d for r in complete for d in r["eot_delay_ms"]]
        out["complete"] = {
            "n": len(complete),
            "eot_delay_ms_p50": _pct(eot, 50),
            "eot_delay_ms_p95": _pct(eot, 95),
            "split_rate": _rate(sum(_split(r) for r in complete), len(complete)),
            "no_turn": sum(r["turns"] == 0 for r in complete),
        }
    paused = of("paused")
    if paused:
        out["paused"] = {
            "n": len(paused),
            "false_cutoff_rate": _rate(sum(_split(r) for r in paused), len(paused)),
            "no_turn": sum(r["turns"] == 0 for r in paused),
        }
    bc = of("backchannel")
    if bc:
        false = sum(r["interrupted"] or r["answered_later"] > 0 for r in bc)
        lost = [r["unplayed_ms"] for r in bc if r.get("unplayed_ms") is not None]
        out["backchannel"] = {
            "n": len(bc),
            "false_barge_in_rate": _rate(false, len(bc)),
            "reply_went_on_rate": _rate(sum(not r["interrupted"] for r in bc), len(bc)),
            "unplayed_ms_max": max(lost) if lost else None,
        }
    talked_over = {
        "interruption": of("interruption"),
        "echo_user_talks": of("echo", user_talks=True),
    }
    for name, rs in talked_over.items():
        if not rs:
            continue
        delays = [
            r["interrupt_ms"] for r in rs if r["interrupted"] and r["interrupt_ms"] is not None
        ]
        # When the cut reply was last heard: what the user hears of being interrupted
        # (paused at the onset, it stops there); delay_ms is the verdict's.
        stops = [r["stop_ms"] for r in rs if r["interrupted"] and r.get("stop_ms") is not None]
        out[name] = {
            "n": len(rs),
            "detected_rate": _rate(sum(r["interrupted"] for r in rs), len(rs)),
            "within_400ms_rate": _rate(sum(d <= WITHIN_MS for d in delays), len(rs)),
            "delay_ms_p50": _pct(delays, 50),
            "delay_ms_max": max(delays) if delays else None,
            "stopped_within_400ms_rate": _rate(sum(q <= WITHIN_MS for q in stops), len(rs)),
            "stop_ms_p50": _pct(stops, 50),
            "stop_ms_max": max(stops) if stops else None,
        }
    echo = of("echo", user_talks=False)
    if echo:
        out["echo"] = {
            "n": len(echo),
            "self_interruption_rate": _rate(sum(r["interrupted"] for r in echo), len(echo)),
            "echo_turns": sum(r["answered_later"] for r in echo),
            "echo_transcripts": sum(len(r["later_turns"]) for r in echo),
        }
    return out


def run(args: argparse.Namespace) -> int:
    from voicepipe import config as C
    from voicepipe.bench._serve import parse_variants

    kinds = set(args.kind or ("complete", "paused", "backchannel", "interruption", "echo"))
    modes = ("before", "after") if args.mode == "both" else (args.mode,)
    base = args.config
    base = dataclasses.replace(
        base, llm=dataclasses.replace(base.llm, max_new_tokens=args.reply_tokens)
    )
    out: dict[str, Any] = {
        "llm": base.llm.model,
        "reply_tokens": args.reply_tokens,
        "config": args.config_file,
        "set": args.clip_set,
        "modes": {},
    }

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    variants = parse_variants(args.variant, base)  # (checked now, before any server)

    for mode in modes:
        cfg: C.Config = dataclasses.replace(
            base, turns=dataclasses.replace(base.turns, backchannel=mode == "after")
        )
        log(f"bench turns: {mode} (turns.backchannel={mode == 'after'})")
        out["modes"][mode] = asyncio.run(_run_mode(cfg, kinds, log, args.clip_set, variants))
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for mode, r in out["modes"].items():
            summaries = {"": r} if "summary" in r else r["variants"]
            for name, res in summaries.items():
                print(f"{mode}{' ' + name if name else ''}:")
                for kind, s in res["summary"].items():
                    print(f"  {kind:<18}" + ", ".join(f"{k}={v}" for k, v in s.items()))
    return 0
