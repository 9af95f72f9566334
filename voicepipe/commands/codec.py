"""`voicepipe codec roundtrip IN.wav OUT.wav [--q N]`: encode to codec tokens and back."""

from __future__ import annotations

import argparse
import json
import math
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "codec",
        help="audio codec tools (round trip through the codec tokens)",
        description=(
            "The audio codec the TTS speaks in: MelVQ (HiFi-GAN log-mel, 4 frames per 46.4 ms "
            "step, residual VQ, HiFi-GAN decoder) or, with --codec.backend=encodec and "
            "--codec.encodec_path=FILE, EnCodec 24 kHz."
        ),
    )
    sub2 = p.add_subparsers(dest="codec_command", metavar="ACTION")
    rt = sub2.add_parser(
        "roundtrip",
        help="IN.wav → codes → OUT.wav; prints frames, bitrate and timings as JSON",
        description=(
            "Read IN.wav (any rate, mono or averaged to mono), resample to the codec's rate, "
            "encode to (T, Q) codes, decode back and write OUT.wav at the codec's rate."
        ),
    )
    rt.add_argument("inp", metavar="IN.wav")
    rt.add_argument("out", metavar="OUT.wav")
    rt.add_argument(
        "--q",
        type=int,
        default=None,
        help="codebooks (RVQ levels) to use (default: codec.q from the config)",
    )
    rt.add_argument("--codes", default="", help="also save the codes as .npy to this path")
    p.set_defaults(func=run, codec_command=None)


def run(args: argparse.Namespace) -> int:
    if args.codec_command != "roundtrip":
        print("usage: voicepipe codec roundtrip IN.wav OUT.wav [--q N]", file=sys.stderr)
        return 2
    import time

    import numpy as np

    from voicepipe.audio import read_wav, resample, write_wav
    from voicepipe.nn.tts.codec import from_config
    from voicepipe.registry import ModelError

    cfg = args.config.codec
    try:
        codec = from_config(cfg, q=args.q)
    except (ModelError, ValueError, OSError, ImportError) as e:
        print(f"voicepipe codec: {e}", file=sys.stderr)
        return 1
    try:
        pcm, sr = read_wav(args.inp)
    except (OSError, EOFError, ValueError) as e:
        print(f"voicepipe codec: cannot read {args.inp}: {e}", file=sys.stderr)
        return 1
    wave = resample(pcm, sr, codec.sample_rate)
    t0 = time.perf_counter()
    codes = codec.encode(wave)
    t1 = time.perf_counter()
    out = codec.decode(codes).numpy()
    t2 = time.perf_counter()
    write_wav(args.out, out, codec.sample_rate)
    if args.codes:
        np.save(args.codes, np.asarray(codes))
    dur = len(wave) / codec.sample_rate
    info = {
        "in": args.inp,
        "out": args.out,
        "seconds": round(dur, 3),
        "frames": int(codes.shape[0]),
        "q": int(codes.shape[1]),
        "frame_rate": round(codec.frame_rate, 3),
        "bitrate_bps": round(codes.shape[1] * math.log2(codec.codebook_size) * codec.frame_rate),
        "encoder_rtf": round((t1 - t0) / max(dur, 1e-9), 4),
        "decoder_rtf": round((t2 - t1) / max(dur, 1e-9), 4),
    }
    print(json.dumps(info))
    return 0
