"""`voicepipe bench asr [--set hard|basic] [--quick] [--json]`: streaming ASR accuracy, latency.

Sets (references in each folder's manifest.json):
- ``hard`` (default): tests/data/asr_hard, 66 voice-assistant utterances in 8 voices
  that trained nothing here (espeak-ng, Piper) over pink / brown / babble / cafe noise
  at 10-20 dB SNR, and 2 noise-only clips (tests/data/asr_hard/make_set.py).
- ``basic``: tests/data/asr, 17 clips in the hibari teacher voice (clean but one).

Two passes:
1. Accuracy, lockstep (decoding as if it took no time, so the text is the same
   on every run): ``wer`` over every clip with speech (corpus WER after
   ``voicepipe.core.text.wer.normalize``), ``false_transcripts`` = finals produced
   on the silence / noise clips.
   ``wer_whole_file``: the same model decoding each clip whole, in one call (no VAD,
   no endpoint): what the streaming path would reach if it cut nothing;
   ``whole_file_rtf`` its decode seconds per audio second; ``wer_by``: the streamed
   WER per voice and per noise kind (clips whose manifest names them).
2. Latency, real time (its finals give ``wer_realtime``, the text a live session
   gets): each clip streamed in 20 ms frames through a real
   ``Pipeline([AsrStage])``, each frame sent when its last sample would have
   been captured by a microphone. Metrics (each over all turns of the pass):
   - ``asr_final_ms``: the ``asr.final`` span, from the arrival of the audio
     that completed the endpoint silence (``vad.end_silence_ms`` after the last
     speech sample) to the final transcript pushed.
   - ``since_speech_end_ms``: from the arrival of the last speech sample to the
     final pushed (= the endpoint silence + ``asr_final_ms``).
   - ``speech_start_ms``: from the arrival of the first sample of the clip whose
     10 ms RMS exceeds -40 dBFS (the true onset; clean clips only) to the first
     SpeechStart pushed.
   - ``partial_rtf``: Σ partial decode seconds / Σ audio seconds those decodes
     covered (each partial re-decodes the utterance so far).
   - ``partial_lag_ms``: from the arrival of the newest sample a partial saw to
     that partial pushed (how far partials trail the speaker).
   - ``cpu_s_per_audio_s``: process CPU time (all threads, ``getrusage``)
     during the pass / seconds of audio streamed.
   - ``early_final_rate``: share of finals taken from a decode started during
     the endpoint silence (none decoded after the endpoint fired).
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "asr",
        help="WER and latency of the streaming ASR stage (JSON)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="real-time pass over 4 clips instead of all (accuracy pass unchanged)",
    )
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.add_argument(
        "--accuracy-only",
        action="store_true",
        help="only the lockstep and whole-file passes (no real-time pass)",
    )
    p.add_argument(
        "--set",
        dest="clip_set",
        choices=sorted(SETS),
        default="hard",
        help="which committed clip set (default: hard)",
    )
    p.add_argument("--clips", default=None, help="folder with manifest.json (overrides --set)")
    p.set_defaults(func=run)


SETS = {"hard": "asr_hard", "basic": "asr"}
# --quick's real-time clips, per set
QUICK = {
    "asr": ("utt01.wav", "utt07.wav", "stream2.wav", "noise.wav"),
    "asr_hard": (
        "h00.flac",
        "h09.flac",
        "h18.flac",
        "h27.flac",
        "h36.flac",
        "h45.flac",
        "noise0.flac",
    ),
}


def read_clip(path):
    """(float32 pcm, rate) of a WAV or, through soundfile, a FLAC clip."""
    from pathlib import Path

    from voicepipe.audio import read_wav

    if Path(path).suffix.lower() == ".wav":
        return read_wav(path)
    import numpy as np
    import soundfile as sf

    pcm, sr = sf.read(str(path), dtype="float32", always_2d=True)
    return np.ascontiguousarray(pcm.mean(axis=1)), int(sr)


def _pct(values: list[float]) -> dict[str, float]:
    import numpy as np

    if not values:
        return {"p50": float("nan"), "p95": float("nan"), "n": 0}
    a = np.asarray(values, dtype=np.float64)
    return {
        "p50": round(float(np.percentile(a, 50)), 1),
        "p95": round(float(np.percentile(a, 95)), 1),
        "n": len(values),
    }


def _onset(pcm, sr: int) -> int:
    import numpy as np

    hop = sr // 100
    n = len(pcm) // hop
    rms = np.sqrt((pcm[: n * hop].reshape(n, hop) ** 2).mean(axis=1) + 1e-12)
    loud = np.nonzero(rms > 10 ** (-40 / 20))[0]
    return int(loud[0]) * hop if len(loud) else -1


async def _realtime(cfg, asr, pcm, sr: int, onset: bool) -> dict:
    import asyncio
    import time

    from voicepipe.clock import now_ns
    from voicepipe.frames import (
        AudioIn,
        Frame,
        InputEnd,
        SpanFrame,
        SpeechStart,
        TranscriptFinal,
    )
    from voicepipe.pipeline import Pipeline
    from voicepipe.stages.asr import AsrStage

    stage = AsrStage(cfg, asr=asr)
    out: list[Frame] = []
    done = asyncio.Event()

    async def sink(f: Frame) -> None:
        out.append(f)
        if isinstance(f, InputEnd):
            done.set()

    pipe = Pipeline([stage], sink)
    await pipe.start()
    n = sr * cfg.audio.frame_ms // 1000
    t0 = now_ns() + 20_000_000
    for seq, i in enumerate(range(0, len(pcm), n)):
        due = t0 + (i + n) * 1_000_000_000 // sr  # when a mic would have delivered this frame
        await asyncio.sleep(max(0.0, (due - now_ns()) / 1e9))
        await pipe.put(
            AudioIn(pcm=pcm[i : i + n], sample_rate=sr, seq=seq, media_ns=i * 1_000_000_000 // sr)
        )
    await pipe.put(InputEnd())
    t_end = time.perf_counter()
    await asyncio.wait_for(done.wait(), 120)
    tail_s = time.perf_counter() - t_end
    await pipe.stop()
    spans = [
        f
        for f in out
        if isinstance(f, SpanFrame) and f.name == "asr.final" and not f.attrs.get("empty")
    ]
    onset_idx = _onset(pcm, sr) if onset else -1
    starts = [f for f in out if isinstance(f, SpeechStart)]
    start_ms = []
    if onset_idx >= 0 and starts:
        start_ms.append((starts[0].t_ns - (t0 + onset_idx * 1_000_000_000 // sr)) / 1e6)
    return {
        "final_ms": [s.duration_ms for s in spans],
        "since_end_ms": [s.attrs["since_speech_end_ms"] for s in spans],
        "start_ms": start_ms,
        "stats": dict(stage.stats),
        "decodes": list(stage.decodes),
        "lag_ms": list(stage.partial_lag_ms),
        "tail_s": tail_s,
        "text": " ".join(f.text for f in out if isinstance(f, TranscriptFinal)),
    }


async def _bench(cfg, clips_dir, quick: bool, log, accuracy_only: bool = False) -> dict:
    import asyncio
    import resource
    from pathlib import Path

    from voicepipe.core.text.wer import wer
    from voicepipe.frames import TranscriptFinal
    from voicepipe.nn.asr.whisper import WhisperAsr
    from voicepipe.stages.asr import AsrStage, stream_file

    clips_dir = Path(clips_dir)
    manifest = json.loads((clips_dir / "manifest.json").read_text())
    clips = manifest["clips"]
    asr = await asyncio.to_thread(WhisperAsr.from_config, cfg)
    await asyncio.to_thread(asr.warmup)

    from voicepipe.audio import resample

    refs, hyps, whole, false_tx = [], [], [], 0
    whole_s = whole_audio_s = 0.0
    groups: dict[str, tuple[list[str], list[str]]] = {}  # streamed WER by voice, by noise
    for c in clips:
        pcm, sr = read_clip(clips_dir / c["file"])
        stage = AsrStage(cfg, asr=asr, partials=False)
        await stage.start()
        out = await stream_file(stage, pcm, sr, frame_ms=cfg.audio.frame_ms)
        await stage.stop()
        text = " ".join(f.text for f in out if isinstance(f, TranscriptFinal))
        if c["finals"]:
            refs.append(" ".join(c["finals"]))
            hyps.append(text)
            for key in ("voice", "noise"):
                if key in c:
                    groups.setdefault(f"{key}:{c[key]}", ([], []))
                    groups[f"{key}:{c[key]}"][0].append(refs[-1])
                    groups[f"{key}:{c[key]}"][1].append(text)
            one = await asyncio.to_thread(asr.transcribe, resample(pcm, sr, 16000))
            whole.append(one.text)
            whole_s += one.seconds
            whole_audio_s += one.audio_s
        else:
            false_tx += bool(text)
        log(f"  {c['file']}: {text!r}")

    accuracy = {
        "model": cfg.asr.model,
        "compute_type": cfg.asr.compute_type,
        "threads": cfg.asr.threads,
        "beam_size": cfg.asr.beam_size,
        "partial_beam_size": cfg.asr.partial_beam_size,
        "window_pad_s": cfg.asr.window_pad_s,
        "end_silence_ms": cfg.vad.end_silence_ms,
        "early_final_ms": cfg.asr.early_final_ms,
        "tail_ms": cfg.asr.tail_ms,
        "set": clips_dir.name,
        "clips": len(clips),
        "wer": round(wer(refs, hyps), 4),
        "wer_whole_file": round(wer(refs, whole), 4),
        # one whole-clip decode's seconds per audio second: the model's own cost
        "whole_file_rtf": round(whole_s / max(whole_audio_s, 1e-9), 4),
        "false_transcripts": false_tx,
        "wer_by": {k: round(wer(r, h), 4) for k, (r, h) in sorted(groups.items())},
    }
    if accuracy_only:
        return accuracy
    rt_clips = clips
    if quick:
        quick_set = QUICK.get(clips_dir.name, ())
        rt_clips = [c for c in clips if c["file"] in quick_set] or clips[:4]
    final_ms, since_ms, start_ms, lag_ms, decodes = [], [], [], [], []
    early = finals = 0
    rt_refs, rt_hyps = [], []
    audio_s = 0.0
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    for c in rt_clips:
        pcm, sr = read_clip(clips_dir / c["file"])
        audio_s += len(pcm) / sr
        # The energy onset is only meaningful on clean clips (noise crosses -40 dBFS).
        clean = c["kind"] in ("utterance", "stream") and not c.get("noise")
        r = await _realtime(cfg, asr, pcm, sr, onset=clean)
        final_ms += r["final_ms"]
        since_ms += r["since_end_ms"]
        start_ms += r["start_ms"]
        lag_ms += r["lag_ms"]
        decodes += r["decodes"]
        early += r["stats"]["early_hits"]
        finals += r["stats"]["finals"]
        if c["finals"]:
            rt_refs.append(" ".join(c["finals"]))
            rt_hyps.append(r["text"])
        log(f"  real time {c['file']}: asr.final {[round(x) for x in r['final_ms']]} ms")
        log(f"    {r['text']!r}")
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    partial = [(a, s) for k, a, s in decodes if k == "partial"]
    return {
        **accuracy,
        "wer_realtime": round(wer(rt_refs, rt_hyps), 4) if rt_refs else None,
        "realtime_clips": len(rt_clips),
        "audio_s": round(audio_s, 2),
        "asr_final_ms": _pct(final_ms),
        "since_speech_end_ms": _pct(since_ms),
        "speech_start_ms": _pct(start_ms),
        "partial_rtf": round(sum(s for _, s in partial) / max(sum(a for a, _ in partial), 1e-9), 4),
        "partial_lag_ms": _pct(lag_ms),
        "partial_decodes": len(partial),
        "decode_ms": _pct([s * 1e3 for _, _, s in decodes]),
        "early_final_rate": round(early / max(finals, 1), 3),
        "cpu_s_per_audio_s": round(cpu_s / max(audio_s, 1e-9), 4),
    }


def run(args: argparse.Namespace) -> int:
    import asyncio

    from voicepipe import registry

    clips = args.clips or str(registry.REPO_ROOT / "tests" / "data" / SETS[args.clip_set])
    log = (lambda *_: None) if args.json else (lambda m: print(m, file=sys.stderr))
    try:
        result = asyncio.run(_bench(args.config, clips, args.quick, log, args.accuracy_only))
    except registry.ModelError as e:
        print(f"voicepipe bench asr: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=None if args.json else 1))
    return 0
