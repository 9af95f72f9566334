"""`voicepipe talk` on a machine without audio devices (like this one and CI)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from voicepipe.commands.talk import check_devices


def test_talk_without_audio_device_says_so() -> None:
    sd = pytest.importorskip("sounddevice")
    if check_devices(sd) is None:
        pytest.skip("this machine has an audio device")
    proc = subprocess.run([sys.executable, "-m", "voicepipe.cli", "talk"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert "no audio input device found" in proc.stderr
    assert "voicepipe serve" in proc.stderr and "voicepipe client --wav" in proc.stderr
    assert "Traceback" not in proc.stderr


class FakeSd:
    """Fault injection only: a PortAudio that sees one output and no input."""

    class PortAudioError(Exception):
        pass

    def query_devices(self, device=None, kind=None):  # noqa: ANN001, ANN201
        out = {"name": "speaker", "max_input_channels": 0, "max_output_channels": 2}
        if kind is None:
            return [out]
        if kind == "input":
            raise self.PortAudioError("Error querying device -1")
        return out


def test_check_devices_names_the_missing_side() -> None:
    msg = check_devices(FakeSd())
    assert msg is not None and "no audio input device" in msg and "1 device(s)" in msg


def test_talk_help_is_helpful() -> None:
    proc = subprocess.run([sys.executable, "-m", "voicepipe.cli", "talk", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "libportaudio2" in proc.stdout
