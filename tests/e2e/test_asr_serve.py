"""`voicepipe serve --pipeline asr` end to end: real server, real client, real Whisper."""

from __future__ import annotations

import json
from pathlib import Path

from voicepipe import config
from voicepipe.audio import read_wav, resample
from voicepipe.client import run_sessions
from voicepipe.core.wer import wer
from voicepipe.server.app import Server

DATA = Path(__file__).resolve().parent.parent / "data" / "asr"


async def test_transcripts_come_back_as_events_per_turn() -> None:
    cfg = config.Config()
    clip = next(c for c in json.loads((DATA / "manifest.json").read_text())["clips"]
                if c["file"] == "stream2.wav")
    pcm, sr = read_wav(DATA / clip["file"])
    pcm44 = resample(pcm, sr, 44100)  # a browser-like capture rate: the server resamples
    server = Server(cfg, pipeline="asr", port=0)
    await server.start()
    try:
        (res,) = await run_sessions(server.ws_url, pcm44, 44100, cfg, speed=2.0,
                                    output_sample_rate=16000, trailing_silence_s=0.5,
                                    timeout_s=60)
    finally:
        await server.close()
    out = res.to_json()
    assert out["ok"], out
    finals = [t["transcript"] for t in out["turns"] if t["transcript"]]
    assert len(finals) == 2, out["turns"]
    for ref, hyp in zip(clip["finals"], finals, strict=True):
        assert wer(ref, hyp) <= 0.2, (ref, hyp)
    assert out["reply_audio_s"] == 0  # recognition only, no reply
    names = [s.name for s in res.spans]
    assert names.count("vad.speech") == 2 and names.count("asr.final") == 2
    assert {s.name for s in server.tracer.spans} >= {"vad.speech", "asr.final"}
