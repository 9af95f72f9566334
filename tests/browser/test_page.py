"""The browser page in Debian's headless Chromium against a real `voicepipe serve`.

Chromium's fake capture device plays a real speech WAV as the microphone; the
loopback pipeline sends it back as a reply; the playback worklet's playout
buffer plays it and reports its counters. A screenshot is saved under
tmp/artifacts/ (VOICEPIPE_ARTIFACTS overrides) for a human to look at.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from voicepipe.audio import read_wav, resample, write_wav

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("VOICEPIPE_ARTIFACTS", ROOT / "tmp" / "artifacts"))


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voicepipe.cli",
            "serve",
            "--pipeline",
            "loopback",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"serving (http://\S+)", line)
        assert m, f"serve printed {line!r}"
        yield m.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def mic_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pcm, sr = read_wav(ROOT / "tests/data/asr/utt01.wav")
    # speech, then a second of silence: Chromium loops the file as the microphone
    loop = np.concatenate([resample(pcm, sr, 48000), np.zeros(48000, np.float32)])
    path = tmp_path_factory.mktemp("mic") / "speech48k.wav"
    write_wav(path, loop, 48000)
    return path


@pytest.fixture(scope="module")
def page(server: str, mic_wav: Path) -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--headless",
                "--no-sandbox",
                "--use-fake-ui-for-media-stream",
                "--use-fake-device-for-media-stream",
                f"--use-file-for-fake-audio-capture={mic_wav}",
                "--autoplay-policy=no-user-gesture-required",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
            ],
        )
        try:
            pg = browser.new_page()
            pg.on("console", lambda m: print(f"[console] {m.type}: {m.text}"))
            pg.on("pageerror", lambda e: print(f"[pageerror] {e}"))
            pg.goto(server)
            yield pg
        finally:
            browser.close()


def _state(page: object) -> dict:
    return page.evaluate("() => JSON.parse(JSON.stringify(window.voicepipe))")  # type: ignore


def test_page_round_trip_through_the_server(page: object) -> None:
    assert page.title() == "voicepipe"  # type: ignore[attr-defined]
    page.click("#start")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => window.voicepipe.status.startsWith('listening')", timeout=30_000
    )
    # the fake microphone's speech goes up, comes back, and the worklet plays it
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => (window.voicepipe.stats.played_ms || 0) > 2000 && window.voicepipe.nonSilent > 0",
        timeout=60_000,
    )
    s = _state(page)
    assert not s["errors"], s["errors"]
    assert s["sentFrames"] > 50 and s["receivedFrames"] > 50
    assert s["receivedPeak"] > 1000  # speech, not silence, reached the server and came back
    st = s["stats"]
    for key in (
        "underruns",
        "concealed_ms",
        "accelerated_ms",
        "stretched_ms",
        "current_delay_ms",
        "target_delay_ms",
    ):
        assert key in st
    assert s["played"] > 0 and s["nonSilent"] > 0
    pl = s["playouts"]["1"]
    assert pl["first_play_ns"] is not None and pl["played_samples"] > 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "browser-loopback.png"
    page.screenshot(path=str(shot), full_page=True)  # type: ignore[attr-defined]
    assert shot.stat().st_size > 5000
    # the counters table shows the worklet's numbers
    assert "target_delay_ms" in page.inner_text("#jitter")  # type: ignore[attr-defined]
    # the latency waterfall draws the server's spans of the turn
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => document.querySelectorAll('#waterfall .wf-row').length > 0", timeout=30_000
    )
    wf = page.inner_text("#waterfall")  # type: ignore[attr-defined]
    assert "turn 1" in wf and "loopback.echo" in wf, wf


def test_stop_button_cuts_the_reply_and_hang_up_ends(page: object) -> None:
    page.click("#stop")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => Object.values(window.voicepipe.replies).some(r => r.interrupted)", timeout=30_000
    )
    page.click("#hangup")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => window.voicepipe.closed !== null", timeout=60_000
    )
    s = _state(page)
    assert s["closed"]["code"] == 1000, s["closed"]
