"""`voicepipe transcribe FILE.wav [--json]`: the streaming ASR path over a file."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "transcribe",
        help="transcribe a WAV file through the streaming ASR path",
        description=(
            "Feeds FILE.wav in 20 ms frames through the same VAD → endpointing → Whisper "
            "stage that `voicepipe serve` runs, as fast as the machine allows, and prints "
            "the final transcript of each turn. Any sample rate; stereo is averaged. "
            "Model and thresholds come from the config (e.g. --asr.model=whisper-base, "
            "--vad.end_silence_ms=600)."
        ),
    )
    p.add_argument("file", help="WAV file (PCM 8/16/32-bit)")
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"text", "finals": [{"text", "turn_id", "start_s", "end_s"}]}',
    )
    p.add_argument(
        "--partials",
        action="store_true",
        help="also decode and print partial transcripts (to stderr), as live",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import wave

    from voicepipe import registry
    from voicepipe.audio import read_wav

    try:
        pcm, sr = read_wav(args.file)
    except (OSError, EOFError, ValueError, wave.Error) as e:
        print(f"voicepipe transcribe: cannot read {args.file}: {e}", file=sys.stderr)
        return 1
    try:
        result = asyncio.run(_transcribe(args.config, pcm, sr, args.partials))
    except registry.ModelError as e:
        print(f"voicepipe transcribe: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(result["text"])
    return 0


async def _transcribe(cfg, pcm, sr: int, partials: bool) -> dict:
    from voicepipe.frames import SpeechStart, TranscriptFinal, TranscriptPartial
    from voicepipe.stages.asr import AsrStage, stream_file

    stage = AsrStage(cfg, partials=partials)
    await stage.start()
    try:
        # Lockstep: the same text on every run, whatever else the machine is doing.
        out = await stream_file(stage, pcm, sr, frame_ms=cfg.audio.frame_ms, lockstep=True)
    finally:
        await stage.stop()
    starts = {f.turn_id: f.media_ns for f in out if isinstance(f, SpeechStart)}
    finals: list[dict[str, Any]] = []
    for f in out:
        if isinstance(f, TranscriptPartial):
            print(f"[partial {f.turn_id}] {f.text}", file=sys.stderr)
        elif isinstance(f, TranscriptFinal):
            finals.append(
                {
                    "text": f.text,
                    "turn_id": f.turn_id,
                    "start_s": round(starts.get(f.turn_id, 0) / 1e9, 3),
                    "end_s": round(f.speech_end_media_ns / 1e9, 3),
                }
            )
    return {"text": " ".join(f["text"] for f in finals), "finals": finals}
