"""`voicepipe say "TEXT" --out X.wav`: synthesize one text with the codec-LM TTS (or hibari)."""

from __future__ import annotations

import argparse
import json
import sys


def _handler(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from voicepipe.audio import write_wav

    cfg = args.config
    backend = args.backend or cfg.tts.backend
    if backend == "hibari":
        from voicepipe.stages.tts import HibariBackend

        hb = HibariBackend(
            seed=args.seed if args.seed is not None else cfg.tts.seed,
            normalize=cfg.tts.normalize,
        )
        list(hb.stream("Warm up."))  # loads the G2P lexicons, not what we measure
        t0 = time.perf_counter()
        chunks, ttfa = [], None
        for c in hb.stream(args.text):
            ttfa = ttfa if ttfa is not None else time.perf_counter() - t0
            chunks.append(c)
        wall = time.perf_counter() - t0
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        out = {
            "backend": "hibari",
            "audio_s": len(audio) / 22050,
            "rtf": wall / max(len(audio) / 22050, 1e-9),
            "ttfa_ms": (ttfa or wall) * 1e3,
            "target_passes": None,
            "acceptance_rate": None,
        }
    else:
        import dataclasses

        from voicepipe.nn.tts.codec_tts import CodecLMTTS
        from voicepipe.registry import ModelError

        keys = ("rule", "beta", "top_k", "temperature", "seed")
        given = {key: getattr(args, key) for key in keys}
        if args.k is not None:
            given["spec_k"] = args.k
        opts = dataclasses.replace(cfg.tts, **{k: v for k, v in given.items() if v is not None})
        try:
            tts = CodecLMTTS.from_config(cfg, args.model or None)
        except (ModelError, FileNotFoundError, ImportError) as e:
            print(f"voicepipe say: {e}", file=sys.stderr)
            return 1
        # First-call costs (oneDNN primitives per vocoder width, allocations) are
        # paid once per process by a server; a one-off run pays them here, unmeasured.
        tts.warm_up()
        tts.synth("Warm up.", opts)
        # Spoken the way the TTS stage speaks it (tts.normalize: core/text/norm.py).
        text = args.text
        if cfg.tts.normalize:
            from voicepipe.core.text.norm import normalize

            text = normalize(text)
        res = tts.synth(text, opts)
        audio = res.audio
        out = {
            "backend": "codec-lm",
            "rule": opts.rule,
            "beta": opts.beta,
            "audio_s": res.audio_s,
            "rtf": res.rtf,
            "ttfa_ms": res.ttfa_s * 1e3,
            "lm_rtf": res.lm_s / max(res.audio_s, 1e-9),
            "target_passes": res.stats.get("target_passes"),
            "acceptance_rate": res.stats.get("acceptance_rate"),
            "mean_accepted_len": res.stats.get("mean_accepted_len"),
            "frames": res.stats.get("frames"),
        }
    if args.out:
        write_wav(args.out, audio, 22050)
        out["out"] = args.out
    if args.json:
        print(json.dumps(out))
    else:
        print(
            " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in out.items())
        )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "say",
        help="synthesize TEXT with the codec-LM TTS (speculative decoding) and write a WAV",
        description=(
            "Text → phonemes (hibari G2P) → predicted durations → codec LM with speculative "
            "decoding → MelVQ codes → HiFi-GAN, streamed. Rules: ar (no speculation), greedy, "
            "exact, relaxed (u < min(1, q/p) + beta), topk (--top-k), acoustic (codebook "
            "distance ≤ beta). Prints audio_s, rtf, ttfa_ms, target_passes, acceptance_rate."
        ),
    )
    p.add_argument("text", help="text to speak")
    p.add_argument("--out", default="", help="output WAV (22,050 Hz)")
    p.add_argument(
        "--backend",
        choices=["codec-lm", "hibari"],
        default=None,
        help="default: tts.backend from the config",
    )
    p.add_argument(
        "--rule",
        choices=["ar", "greedy", "exact", "relaxed", "topk", "acoustic"],
        default=None,
        help="acceptance rule (default tts.rule)",
    )
    p.add_argument("--beta", type=float, default=None, help="tolerance (default tts.beta)")
    p.add_argument("--top-k", dest="top_k", type=int, default=None, help="k for --rule topk")
    p.add_argument("--k", type=int, default=None, help="initial draft length (default tts.spec_k)")
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sampling temperature (0: greedy; default tts.temperature)",
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--model", default="", help="checkpoint directory instead of codec-lm-hibari")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_handler)
