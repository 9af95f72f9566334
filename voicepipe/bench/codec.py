"""`voicepipe bench codec [--quick] [--json] [--vocoder-variants]`.

Rows for Q = 1…8 on held-out teacher sentences (the "heldout" split of
`voicepipe train tts-data`; without it, a fixed sentence list spoken by hibari):

    wer           round-trip WER (``--asr-model``, default tiny.en) of encode → decode
                  audio vs the text
    wer_original  the same ASR on the original audio (the floor the codec is judged against)
    lsd_db        log-spectral distance original ↔ resynthesis (dB, 1024-pt STFT, hop 256)
    encoder_rtf   wall time of encode (log-mel + RVQ) / audio duration
    decoder_rtf   wall time of decode (code sums + vocoder) / audio duration

The vocoder is the config's (``--codec.vocoder=vocoder-hibari``, a directory, or
``hifigan-universal``); ``--q 4`` measures the shipped level only.

``--vocoder-variants`` times HiFi-GAN alone on the same audio in each speed
configuration (fp32 eager, threads, bf16, torch.compile, …); each RTF is the
best of ``--repeats`` runs, since the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

FALLBACK_SENTENCES = [
    "The meeting has been moved to Thursday afternoon at three.",
    "Please remind me to call my sister when I get home.",
    "It will be cloudy tomorrow with a light breeze from the west.",
    "Your package was delivered to the front desk this morning.",
    "Add two cups of flour and stir until the batter is smooth.",
    "The train to Boston leaves from platform nine in ten minutes.",
    "I found three Italian restaurants within walking distance.",
    "Sure, I can set a timer for twenty five minutes.",
    "The library closes early on Sundays during the summer.",
    "Turn left at the second light, then the station is on your right.",
]


def heldout(limit: int) -> list[tuple[str, object]]:
    """[(text, wave 22,050 Hz float32)] of held-out sentences."""
    import numpy as np

    from voicepipe.audio import read_wav, resample
    from voicepipe.training.tts_data import data_dir, read_manifest

    root = data_dir()
    rows = [r for r in read_manifest(root) if r.get("split") == "heldout"]
    rows.sort(key=lambda r: r["id"])
    out = []
    for r in rows[:limit]:
        wave, sr = read_wav(root / r["wav"])
        out.append((r["text"], resample(wave, sr, 22050)))
    if out:
        return out
    from hibari import Hibari

    tts = Hibari()
    for i, text in enumerate(FALLBACK_SENTENCES[:limit]):
        w = np.asarray(tts(text, seed=i), dtype=np.float32)
        out.append((text, resample(w, 24000, 22050)))
    return out


def lsd_db(ref, test) -> float:
    """Log-spectral distance in dB: mean over frames of the RMS over bins of 10·log10(P/P̂).

    Powers are floored 80 dB below the utterance's peak bin, so silent stretches and
    empty bins compare as equal instead of dominating with noise-floor differences.
    """
    import torch

    n = min(len(ref), len(test))
    win = torch.hann_window(1024)

    def power(x):
        s = torch.stft(
            torch.as_tensor(x[:n], dtype=torch.float32), 1024, 256, window=win, return_complex=True
        )
        return s.abs().square()

    p, p_hat = power(ref), power(test)
    floor = p.max() * 1e-8
    d = 10 * torch.log10(p.clamp_min(floor) / p_hat.clamp_min(floor))  # (F, T)
    return float(d.square().mean(0).sqrt().mean())


def _rtf_best(fn, seconds: float, repeats: int) -> tuple[float, float]:
    """(wall RTF, CPU RTF), each the best of ``repeats`` runs.

    CPU RTF = process CPU seconds / threads / audio seconds: what the wall RTF
    would be on an idle machine with perfect scaling. Both are reported because
    the machine is shared and wall time then measures the neighbours too.
    """
    import torch

    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, (time.process_time() - c0) / torch.get_num_threads())
    return best / seconds, best_cpu / seconds


def bench_rows(
    codec, data, qs: list[int], repeats: int, verbose: bool = False, asr: str = "whisper-tiny.en"
) -> tuple[list[dict], float]:
    import numpy as np

    from voicepipe.core.text.wer import wer
    from voicepipe.roundtrip import transcribe

    texts = [t for t, _ in data]
    seconds = sum(len(w) for _, w in data) / 22050
    orig_hyps = [transcribe(w, 22050, model=asr) for _, w in data]
    wer_orig = wer(texts, orig_hyps)
    rows = []
    for q in qs:
        c = codec.with_q(q)
        codes = [c.encode(w) for _, w in data]
        enc, enc_cpu = _rtf_best(lambda c=c: [c.encode(w) for _, w in data], seconds, repeats)
        waves = [c.decode(k).numpy() for k in codes]
        dec, dec_cpu = _rtf_best(lambda c=c, codes=codes: [c.decode(k) for k in codes], seconds, 1)
        hyps = [transcribe(w, 22050, model=asr) for w in waves]
        rows.append(
            {
                "q": q,
                "wer": round(wer(texts, hyps), 4),
                "wer_original": round(wer_orig, 4),
                "lsd_db": round(
                    float(np.mean([lsd_db(o, r) for (_, o), r in zip(data, waves, strict=True)])), 3
                ),
                "encoder_rtf": round(enc, 4),
                "decoder_rtf": round(dec, 4),
                "encoder_cpu_rtf": round(enc_cpu, 4),
                "decoder_cpu_rtf": round(dec_cpu, 4),
                "bitrate_bps": round(q * 10 * codec.frame_rate),
            }
        )
        if verbose:
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows, seconds


def vocoder_only(codec, data, asr: str = "whisper-tiny.en") -> dict:
    """Copy-synthesis reference: original mel → HiFi-GAN, no quantization."""
    import numpy as np
    import torch

    from voicepipe.core.text.wer import wer
    from voicepipe.nn.vocoder.mel import log_mel
    from voicepipe.roundtrip import transcribe

    waves = [codec.vocoder(log_mel(torch.as_tensor(w))).numpy() for _, w in data]
    return {
        "wer": round(
            wer([t for t, _ in data], [transcribe(w, 22050, model=asr) for w in waves]), 4
        ),
        "lsd_db": round(
            float(np.mean([lsd_db(o, r) for (_, o), r in zip(data, waves, strict=True)])), 3
        ),
    }


def vocoder_variants(data, repeats: int, compile_variants: bool) -> list[dict]:
    """RTF of HiFi-GAN alone (mel already computed) in each speed configuration.

    Variants run interleaved, one pass each per round, best of ``repeats`` rounds, so
    that a burst of load on the shared machine hits them all alike. ``mel_err``: mean
    |Δ log-mel| of the output against the plain fp32 generator's.
    """
    import torch

    from voicepipe.nn.vocoder.hifigan import StreamingVocoder, Vocoder, load_generator
    from voicepipe.nn.vocoder.mel import log_mel

    mels = [log_mel(torch.as_tensor(w)) for _, w in data]
    seconds = sum(m.shape[1] for m in mels) * 256 / 22050
    gen = load_generator()

    def plain(m):
        with torch.no_grad():
            return gen(m[None])[0]

    def streamed(voc):
        def f(m):
            sv = StreamingVocoder(voc)
            parts = [sv.push(m[:, i : i + 32]) for i in range(0, m.shape[1], 32)]
            return torch.cat(parts + [sv.flush()])

        return f

    def exact(voc, chunk: int):
        """As the TTS streams: 16 frames first, then ``chunk``, the tail in power-of-two
        multiples of 4 frames (a few fixed widths: oneDNN primitives are reused)."""
        from voicepipe.nn.vocoder.hifigan_stream import ExactStreamingVocoder

        def f(m):
            sv = ExactStreamingVocoder(voc)
            parts, i, n = [sv.push(m[:, :16])], 16, m.shape[1]
            while n - i >= chunk:
                parts.append(sv.push(m[:, i : i + chunk]))
                i += chunk
            for size in (32, 16, 8, 4, 2, 1):
                if n - i >= size:
                    parts.append(sv.push(m[:, i : i + size]))
                    i += size
            return torch.cat(parts + [sv.flush()])

        return f

    variants = [
        ("fp32 eager, no_grad (plain generator)", plain, 2),
        ("fp32 eager, 1 thread", plain, 1),
        ("fp32 eager, inference_mode", Vocoder(gen, dtype="fp32", fast=False), 2),
        ("bf16 autocast", Vocoder(gen, dtype="bf16", fast=False), 2),
        (
            "bf16 weights + activations (1-D convs)",
            Vocoder(gen, dtype="bf16-weights", fast=False),
            2,
        ),
        (
            "fast fp32: channels-last 2-D convs, polyphase upsampling, 1/3 folded, in-place",
            Vocoder(gen, dtype="fp32", fast=True),
            2,
        ),
        (
            "fast bf16 (the default on AVX-512 BF16 CPUs)",
            Vocoder(gen, dtype="bf16-weights", fast=True),
            2,
        ),
        (
            "fast bf16 streamed: 32-frame chunks, 12 left + 12 lookahead",
            streamed(Vocoder(gen, dtype="bf16-weights", fast=True)),
            2,
        ),
        (
            "fast bf16 exact streaming (cached conv state, prepacked): 16 + 32-frame chunks",
            exact(Vocoder(gen, dtype="bf16-weights", fast=True), 32),
            2,
        ),
        (
            "fast bf16 exact streaming: 16 + 64-frame chunks",
            exact(Vocoder(gen, dtype="bf16-weights", fast=True), 64),
            2,
        ),
    ]
    if compile_variants:
        variants += [
            (
                "torch.compile fp32 (1-D, frozen weights)",
                Vocoder(gen, dtype="fp32", fast=False, compile=True),
                2,
            ),
            (
                "torch.compile fast bf16 (frozen weights)",
                Vocoder(gen, dtype="bf16-weights", fast=True, compile=True),
                2,
            ),
        ]
    ref = [plain(m) for m in mels]
    out = []
    for name, fn, threads in variants:
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        fn(mels[0][:, :64])  # warm-up: oneDNN primitive creation, compilation
        warm = time.perf_counter() - t0
        err = sum(
            float((log_mel(fn(m)) - log_mel(r)).abs().mean())
            for m, r in zip(mels[:2], ref[:2], strict=False)
        ) / min(2, len(mels))
        out.append(
            {
                "variant": name,
                "threads": threads,
                "rtf": float("inf"),
                "cpu_rtf": float("inf"),
                "mel_err": round(err, 4),
                "warmup_s": round(warm, 1),
            }
        )
    for _ in range(repeats):
        for row, (_, fn, threads) in zip(out, variants, strict=True):
            torch.set_num_threads(threads)
            rtf, cpu = _rtf_best(lambda fn=fn: [fn(m) for m in mels], seconds, 1)
            row["rtf"] = round(min(row["rtf"], rtf), 4)
            row["cpu_rtf"] = round(min(row["cpu_rtf"], cpu), 4)
    for row in out:
        print(json.dumps(row), file=sys.stderr, flush=True)
    torch.set_num_threads(2)
    return out


def run(args: argparse.Namespace) -> int:
    import platform

    import torch

    from voicepipe.nn.tts.codec import MelVQCodec

    torch.set_num_threads(args.threads)
    data = heldout(args.sentences or (8 if args.quick else 30))
    result: dict = {
        "machine": f"{platform.machine()} {torch.get_num_threads()} threads, torch "
        f"{torch.__version__}",
        "sentences": len(data),
    }
    if args.vocoder_variants:
        result["vocoder_variants"] = vocoder_variants(data, args.repeats, not args.no_compile)
    else:
        codec = MelVQCodec.load(
            args.config.codec.model, q=None, vocoder_name=args.config.codec.vocoder
        )
        qs = [1, 2, 4, 8] if args.quick else list(range(1, codec.levels + 1))
        if args.q:
            qs = [args.q]
        rows, seconds = bench_rows(codec, data, qs, args.repeats, True, args.asr_model)
        result["audio_seconds"] = round(seconds, 1)
        result["asr_model"] = args.asr_model
        result["vocoder"] = {"name": args.config.codec.vocoder, "dtype": codec.vocoder.dtype,
                             "fast": codec.vocoder.fast}  # fmt: skip
        result["vocoder_only"] = vocoder_only(codec, data, args.asr_model)
        result["rows"] = rows
    print(json.dumps(result, indent=None if args.json else 1))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "codec",
        help="MelVQ codec: round-trip WER, LSD, encoder/decoder RTF for Q = 1…8",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="8 sentences, Q in {1, 2, 4, 8}")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--sentences", type=int, default=0, help="held-out sentences (default 30)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2, help="timing repeats (best is kept)")
    p.add_argument("--q", type=int, default=0, help="only this Q (default: every level)")
    p.add_argument(
        "--asr-model",
        default="whisper-tiny.en",
        help="the judging ASR (whisper-base: a stronger judge, as bench tts --set replies)",
    )
    p.add_argument(
        "--vocoder-variants",
        action="store_true",
        help="time HiFi-GAN alone in each speed configuration instead",
    )
    p.add_argument(
        "--no-compile",
        action="store_true",
        help="skip the torch.compile variants (slow to compile)",
    )
    p.set_defaults(func=run)
