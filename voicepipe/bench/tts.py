"""`voicepipe bench tts`: speed and round-trip WER of the codec-LM TTS per rule and β, vs hibari.

Sentences: the held-out split of the seeded corpus (never trained on), so the
benchmark needs no generated data. For each row every sentence is
synthesized free-running (predicted durations, the real future phonemes in
the lookahead), vocoded, transcribed with the default ASR (Whisper tiny.en)
and scored with ``core.wer``.

Columns: ``speedup`` = codec-LM decoding time of plain AR decoding at the
same temperature / that of the row (the vocoder is identical for both and is
left out); ``rtf`` = (LM + vocoder) time / audio seconds; ``ttfa_ms`` =
call → first audio chunk. The rows ``ar-streamed`` and ``<rule>-streamed``
(the configured default rule, what a session runs) are measured end to end
through the streaming decoder, with ``cpu_rtf`` = process CPU seconds (all
threads) per audio second, which the machine's load barely moves; the other
rows time the LM alone and add the
vocoder time measured in that streamed run (the vocoder does the same work
for any codes), and decode each distinct code sequence once for the WER.
``target_passes_per_s`` = target forward passes
per second of audio. Rules: ``relaxed`` at β = 0 is the exact rule (sampled,
temperature ``--temperature``); ``topk`` uses k = 1 + round(10 β); ``acoustic``
accepts a draft whose level-0 codebook vector is within β (in units of the
mean pairwise codebook distance) of the target's greedy choice.

``--memory N`` instead measures resident memory (RSS) as N sessions' TTS
backends come up in one process: weights are shared, so an extra session
should cost only its decoding state.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from voicepipe.bench.common import TTS_BETAS, load_avg


def _row(
    backend: str, rule: str, beta: float | None, res: list, refs: list[str], base_lm: float | None
) -> dict:
    from voicepipe.core.text.wer import wer
    from voicepipe.roundtrip import transcribe

    hyps = [transcribe(r.audio, 22050) for r in res]
    audio_s = sum(r.audio_s for r in res)
    lm_s = sum(r.lm_s for r in res)
    st = [r.stats for r in res]
    drafted = sum(s.get("drafted", 0) for s in st)
    drafts = sum(s.get("drafts", 0) for s in st)
    accepted = sum(s.get("accepted", 0) for s in st)
    passes = sum(s.get("target_passes", 0) for s in st)
    return {
        "backend": backend,
        "rule": rule,
        "beta": beta,
        "speedup": (base_lm / lm_s) if base_lm and lm_s else None,
        "wer": wer(refs, hyps),
        "rtf": sum(r.wall_s for r in res) / audio_s,
        "lm_rtf": lm_s / audio_s if lm_s else None,
        "ttfa_ms": 1e3 * sorted(r.ttfa_s for r in res)[len(res) // 2],
        "acceptance_rate": accepted / drafted if drafted else None,
        "mean_accepted_len": 1 + accepted / drafts if drafts else None,
        "target_passes_per_s": passes / audio_s if passes else None,
        "audio_s": audio_s,
        "n": len(res),
        "examples": [{"ref": a, "hyp": b} for a, b in list(zip(refs, hyps, strict=True))[:3]],
    }


def _hibari(texts: list[str]) -> list:
    import numpy as np

    from voicepipe.nn.tts.codec_tts import SynthResult
    from voicepipe.stages.tts import HibariBackend

    # The corpus text as the codec-LM rows get it (CodecLMTTS, no text front-end), so the
    # teacher row stays comparable with them and with earlier runs.
    hb = HibariBackend(normalize=False)
    list(hb.stream("Warm up."))
    out = []
    for t in texts:
        t0 = time.perf_counter()
        chunks, ttfa = [], None
        for c in hb.stream(t):
            ttfa = ttfa if ttfa is not None else time.perf_counter() - t0
            chunks.append(c)
        wall = time.perf_counter() - t0
        out.append(
            SynthResult(np.concatenate(chunks), np.zeros((0, 0)), {}, ttfa or wall, wall, 0.0)
        )
    return out


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def memory(cfg, n: int) -> dict:
    """Resident memory as N sessions' TTS backends come up (each speaks one sentence),
    built the way the TTS stage builds them; run in a fresh process (nothing else
    loaded), so the figures are the TTS's own."""
    from voicepipe.stages.tts import make_backend

    rss = [_rss_mb()]
    keep = []
    for _ in range(n):
        b = make_backend(cfg)
        for _ in b.stream("Sure, the capital of France is Paris."):
            pass
        keep.append(b)
        rss.append(_rss_mb())
    extra = [b - a for a, b in zip(rss[1:], rss[2:], strict=False)]
    return {
        "sessions": n,
        "rss_mb": rss,
        "first_session_mb": rss[1] - rss[0],
        "extra_session_mb": extra,
        "mean_extra_session_mb": sum(extra) / len(extra) if extra else None,
    }


def run(args: argparse.Namespace) -> dict:
    import dataclasses

    import numpy as np
    import torch

    from voicepipe.nn.tts.codec_tts import CodecLMTTS, SynthResult
    from voicepipe.training.corpus import sentences

    torch.set_num_threads(args.threads)
    n = args.sentences or (8 if args.quick else 30)
    texts = sentences(4000, 60, 0)[1][:n]
    betas = (0.0, 0.3) if args.quick else TTS_BETAS
    rules = args.rules.split(",")
    rows = []
    if not args.no_hibari:
        rows.append(_row("hibari", "-", None, _hibari(texts), texts, None))
        print(json.dumps(rows[-1]), file=sys.stderr)
    models = None
    if args.ckpt:
        from voicepipe.nn.tts.codec_tts import load_training_checkpoints

        models = load_training_checkpoints(args.ckpt, args.duration_ckpt)
    tts = CodecLMTTS.from_config(args.config, args.model or None, models)
    tts.threads, tts.lm_threads = args.threads, args.lm_threads
    tts.warm_up()
    # The configured default (rule, β, k), streamed end to end: what a session gets.
    default = dataclasses.replace(args.config.tts, seed=args.seed)
    streamed_default, cpu_default = _timed_cpu(lambda: [tts.synth(t, default) for t in texts])
    # Plain AR, streamed end to end: the measured RTF and ttfa, and the vocoder's share.
    ar = dataclasses.replace(args.config.tts, rule="ar", seed=args.seed)
    streamed, cpu_ar = _timed_cpu(lambda: [tts.synth(t, ar) for t in texts])
    voc_s = sum(r.wall_s - r.lm_s for r in streamed)
    voc_rtf = voc_s / sum(r.audio_s for r in streamed)
    first_voc_s = float(np.median([r.ttfa_s - r.stats.get("first_s", 0.0) for r in streamed]))
    audio_cache: dict[bytes, np.ndarray] = {}

    def synth_all(**kw) -> list:
        """Codes with timing (LM only); audio decoded once per distinct code sequence."""
        # The rows of the sweep: [tts] with the swept keys, every other key as before
        # (greedy, β 0, k 3 unless the row says otherwise).
        base = {"rule": "greedy", "beta": 0.0, "top_k": 3, "temperature": 0.0}
        opts = dataclasses.replace(args.config.tts, spec_k=args.k, seed=args.seed, **{**base, **kw})
        out = []
        for t in texts:
            codes, stats, lm_s = tts.decode_codes(t, opts)
            key = codes.tobytes()
            if key not in audio_cache:
                audio_cache[key] = tts.codec.decode(codes[:, : tts.codec.q]).numpy()
            audio = audio_cache[key]
            # RTF and ttfa: this row's LM time + the vocoder time measured in the streamed run.
            wall = lm_s + voc_rtf * len(audio) / 22050
            out.append(
                SynthResult(
                    audio, codes, stats, stats.get("first_s", lm_s) + first_voc_s, wall, lm_s
                )
            )
        return out

    for temp in sorted({0.0} | ({args.temperature} if "relaxed" in rules else set())):
        base = synth_all(rule="ar", temperature=temp)
        base_lm = sum(r.lm_s for r in base)
        if temp == 0.0:
            rows.append(
                _row("codec-lm", "ar-streamed", None, streamed, texts, base_lm)
                | {"temperature": 0.0, "vocoder_rtf": voc_rtf, "cpu_rtf": _per_s(cpu_ar, streamed)}
            )
            print(json.dumps(rows[-1]), file=sys.stderr)
            rows.append(
                _row(
                    "codec-lm",
                    f"{default.rule}-streamed",
                    default.beta,
                    streamed_default,
                    texts,
                    base_lm,
                )
                | {
                    "temperature": default.temperature,
                    "top_k": default.top_k,
                    "default": True,
                    "cpu_rtf": _per_s(cpu_default, streamed_default),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr)
        rows.append(_row("codec-lm", "ar", None, base, texts, base_lm) | {"temperature": temp})
        print(json.dumps(rows[-1]), file=sys.stderr)
        for rule in rules:
            if (rule == "relaxed") != (temp > 0):
                continue
            for beta in [0.0] if rule == "greedy" else betas:
                kw = {"rule": rule, "beta": beta, "temperature": temp}
                if rule == "topk":
                    kw["top_k"] = 1 + round(10 * beta)
                res = synth_all(**kw)
                rows.append(
                    _row("codec-lm", rule, beta, res, texts, base_lm) | {"temperature": temp}
                )
                print(json.dumps(rows[-1]), file=sys.stderr)
    return {
        "rows": rows,
        "sentences": n,
        "threads": args.threads,
        "lm_threads": args.lm_threads,
        "spec_k": args.k,
        "vocoder_rtf": voc_rtf,
        "chunk_frames": tts.chunk_frames,
        "first_frames": tts.first_frames,
        "load_avg": load_avg(),
    }


def _timed_cpu(fn):
    """(fn(), process CPU seconds it took): all threads, so a load-independent cost."""
    c0 = time.process_time()
    out = fn()
    return out, time.process_time() - c0


def _per_s(cpu_s: float, res: list) -> float:
    return cpu_s / sum(r.audio_s for r in res)


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    by_rule: dict[str, list[dict]] = {}
    for r in result["rows"]:
        # The streamed default is one end-to-end point, not a sweep: the table has it.
        if r["backend"] == "codec-lm" and r["beta"] is not None and "streamed" not in r["rule"]:
            by_rule.setdefault(r["rule"], []).append(r)
    for rule, rs in by_rule.items():
        rs.sort(key=lambda r: r["beta"])
        a1.plot([r["beta"] for r in rs], [r["speedup"] for r in rs], "o-", label=rule)
        a2.plot([r["beta"] for r in rs], [100 * r["wer"] for r in rs], "o-", label=rule)
    for r in result["rows"]:
        if r["rule"] == "ar":
            a2.axhline(100 * r["wer"], ls="--", c="gray", lw=0.8)
        if r["backend"] == "hibari":
            a2.axhline(100 * r["wer"], ls=":", c="green", lw=0.8, label="hibari")
    a1.set(xlabel="β", ylabel="speedup over plain AR (LM time)", title="speed")
    a2.set(xlabel="β", ylabel="round-trip WER %", title="intelligibility")
    a1.legend()
    a2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _handler(args: argparse.Namespace) -> int:
    if args.make_replies:
        from voicepipe.bench.tts_replies import make_replies

        print(make_replies(args.config, args.make_replies, limit=args.sentences))
        return 0
    if args.set == "replies":
        from voicepipe.bench.tts_replies_bench import run_replies

        result = run_replies(args)
        print(json.dumps(result) if args.json else json.dumps(result["rows"], indent=1))
        return 0
    if args.memory:
        mem = memory(args.config, args.memory)
        print(
            json.dumps({"memory": mem})
            if args.json
            else f"first session {mem['first_session_mb']:.0f} MB, each extra session "
            f"{mem['mean_extra_session_mb']:.1f} MB (RSS {mem['rss_mb']})"
        )
        return 0
    result = run(args)
    if args.plot:
        plot(result, args.plot)
    if args.json:
        print(json.dumps(result))
    else:
        for r in result["rows"]:
            print(
                f"{r['backend']:9s} {r['rule']:8s} β={r['beta']!s:5s} "
                f"speedup={r['speedup'] or 0:.2f} wer={100 * r['wer']:.1f}% "
                f"rtf={r['rtf']:.3f} ttfa={r['ttfa_ms']:.0f}ms "
                f"acc={r['acceptance_rate'] or 0:.2f} len={r['mean_accepted_len'] or 0:.2f}"
            )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tts",
        help="codec-LM TTS: speedup, WER, RTF, ttfa per acceptance rule and β, vs hibari",
        description=__doc__.split("\n\n")[0] + " See the module docstring for the columns.",
    )
    p.add_argument("--quick", action="store_true", help="8 sentences, β ∈ {0, 0.3}")
    p.add_argument("--sentences", type=int, default=0, help="held-out sentences (default 30)")
    p.add_argument(
        "--rules",
        default="greedy,relaxed,topk,acoustic",
        help="comma-separated rules (default greedy,relaxed,topk,acoustic)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=0.7,
        help="sampling temperature for the relaxed/exact rows (default 0.7)",
    )
    p.add_argument("--k", type=int, default=4, help="initial draft length (adaptive)")
    p.add_argument("--threads", type=int, default=2, help="torch threads of the vocoder")
    p.add_argument("--lm-threads", type=int, default=1, help="torch threads of the codec LM")
    p.add_argument(
        "--memory",
        type=int,
        default=0,
        metavar="N",
        help="only measure resident memory as N sessions' TTS backends come up",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default="", help="checkpoint directory instead of codec-lm-hibari")
    p.add_argument("--ckpt", default="", help="evaluate a training checkpoint (runs/tts/…)")
    p.add_argument(
        "--duration-ckpt",
        default="",
        help="with --ckpt: duration checkpoint (default: the shipped model's predictor)",
    )
    p.add_argument("--no-hibari", action="store_true", help="skip the hibari baseline row")
    p.add_argument("--plot", default="", help="write a speedup/WER-vs-β PNG here")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--set",
        choices=["heldout", "replies"],
        default="heldout",
        help="heldout: corpus sentences like the training set (default); replies: the "
        "assistant's own replies to held-out prompts (bench/tts_replies.py), judged by "
        "--asr-model",
    )
    p.add_argument(
        "--replies-model",
        default="",
        help="--set replies: whose replies (default qwen2.5-coder-1.5b's if stored, else "
        "smollm2-135m's)",
    )
    p.add_argument(
        "--asr-model",
        default="whisper-base",
        help="--set replies: the judging ASR model (default whisper-base)",
    )
    p.add_argument(
        "--durations",
        choices=["predicted", "teacher"],
        default="",
        help="--set replies: the codec LM's alignment from its duration predictor or from "
        "hibari's own durations (default: [tts] durations)",
    )
    p.add_argument(
        "--first-break-words",
        type=int,
        default=None,
        metavar="N",
        help="--set replies: cut each reply into chunks as the LLM stage does with [llm] "
        "first_break_words = N (0: the first chunk only at punctuation) instead of the "
        "stored chunks; only the shipped rule's row, with the first seam's gap and energy",
    )
    p.add_argument(
        "--make-replies",
        default="",
        metavar="MODEL",
        help="generate (or resume) MODEL's stored replies for --set replies, then exit",
    )
    p.set_defaults(func=_handler)
