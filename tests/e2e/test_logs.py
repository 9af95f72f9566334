"""`voicepipe serve --log-format json`: the lines an operator searches, as JSON.

A real server (subprocess, the ``parrot`` pipeline: a turn-shaped reply without models)
and the headless client: stderr must carry, one JSON object per line, the session's
start, its turn (session, turn, transcript and reply length, voice to voice, outcome)
and its end, each field a key of its own; every other line is JSON too.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from voicepipe import config
from voicepipe.bench._ray import free_port, stop
from voicepipe.client import ClientSession

ROOT = Path(__file__).resolve().parents[2]
RATE = 16000


async def test_session_and_turn_lines_as_json() -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "voicepipe.cli", "serve", "--pipeline", "parrot"]
    cmd += ["--port", str(port), "--log-format", "json"]
    # Popen returns at once; the URL line on stdout says when it serves.
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,  # noqa: ASYNC220
                            start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("voicepipe: serving"), line
        t = np.arange(RATE) / RATE
        speech = (0.2 * np.sin(2 * np.pi * 180 * t)).astype(np.float32)
        url = f"ws://127.0.0.1:{port}/ws"
        client = ClientSession(
            url, speech, RATE, config.Config(), output_sample_rate=RATE, trailing_silence_s=0.2
        )
        res = await client.run()
        assert res.done and not res.error, res.to_json()
    finally:
        stop(proc, signal.SIGINT)
    assert proc.stderr is not None
    records = []
    for raw in proc.stderr.read().decode().splitlines():
        if raw.startswith("{"):
            records.append(json.loads(raw))
        else:  # the CLI's own progress lines (print, not logging) are plain text
            assert raw.startswith("voicepipe:"), raw
    mine = [r for r in records if r.get("session") == res.session_id]
    assert [r["event"] for r in mine] == ["session_start", "turn", "session_end"], mine
    start, turn, end = mine
    assert start["endpoint"] == "/ws" and start["pipeline"] == "parrot"
    assert turn["turn"] == 1 and turn["outcome"] == "completed"
    assert turn["transcript_chars"] == 0 and turn["voice_to_voice_ms"] > 0
    assert end["turns"] == 1 and end["close_code"] == 1000
    assert all({"ts", "level", "logger", "msg"} <= set(r) for r in records)
