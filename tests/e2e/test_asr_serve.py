"""`voicepipe serve --pipeline asr` end to end: real server, real client, real Whisper."""

from __future__ import annotations

import json
from pathlib import Path

from voicepipe import config
from voicepipe.audio import read_wav, resample
from voicepipe.client import run_sessions
from voicepipe.core.text.wer import wer
from voicepipe.server.app import Server

DATA = Path(__file__).resolve().parent.parent / "data" / "asr"


async def test_transcripts_come_back_as_events_per_turn() -> None:
    cfg = config.Config()
    clip = next(
        c
        for c in json.loads((DATA / "manifest.json").read_text())["clips"]
        if c["file"] == "stream2.wav"
    )
    pcm, sr = read_wav(DATA / clip["file"])
    pcm44 = resample(pcm, sr, 44100)  # a browser-like capture rate: the server resamples
    server = Server(cfg, pipeline="asr", port=0)
    await server.start()
    try:
        (res,) = await run_sessions(
            server.ws_url,
            pcm44,
            44100,
            cfg,
            speed=2.0,
            output_sample_rate=16000,
            trailing_silence_s=0.5,
            timeout_s=60,
        )
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


def test_transcribe_command_json_and_errors(tmp_path, capsys) -> None:
    from voicepipe import cli

    assert cli.main(["transcribe", str(DATA / "stream2.wav"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [f["turn_id"] for f in out["finals"]] == [1, 2]
    assert out["text"] == " ".join(f["text"] for f in out["finals"])
    assert 0 < out["finals"][0]["end_s"] < out["finals"][1]["start_s"]
    assert (
        wer(
            "Good morning, how are you today? I would like to book a table for two people.",
            out["text"],
        )
        <= 0.1
    )
    assert cli.main(["transcribe", str(DATA / "silence.wav")]) == 0
    assert capsys.readouterr().out.strip() == ""
    bad = tmp_path / "bad.wav"
    bad.write_text("not a wav")
    assert cli.main(["transcribe", str(bad)]) == 1
    assert "cannot read" in capsys.readouterr().err
