"""The frame-rate iSTFT vocoder: streamed output is the whole-utterance output, a frame's
audio comes out ``lookahead`` frames later, weights survive fp16 export, and the codec
picks it (and its stream) by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.nn.tts.codec import CodecStreamDecoder, MelVQCodec, load_vocoder
from voicepipe.nn.vocoder.istft_stream import IstftRunner, IstftStream
from voicepipe.nn.vocoder.istft_vocoder import (
    FILE_NAME,
    SILENCE,
    IstftArgs,
    IstftVocoder,
    overlap_add,
)
from voicepipe.nn.vocoder.mel import HOP, N_FFT


def _model(seed: int = 0, blocks: int = 3) -> IstftVocoder:
    torch.manual_seed(seed)
    m = IstftVocoder(IstftArgs(channels=32, blocks=blocks)).eval()
    with torch.no_grad():  # an untrained head is near silence; make every bin matter
        m.head.weight.mul_(30.0)
    return m


def _mel(frames: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(80, frames, generator=g) * 2.0 - 6.0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 23), min_size=1, max_size=12))
def test_streaming_equals_the_whole_utterance(sizes: list[int]) -> None:
    m = _model()
    mel = _mel(sum(sizes))
    whole = IstftRunner(m)(mel)
    stream = IstftStream(IstftRunner(m))
    out, i = [], 0
    for n in sizes:
        out.append(stream.push(mel[:, i : i + n]))
        i += n
    out.append(stream.flush())
    got = torch.cat(out)
    assert got.shape == (sum(sizes) * HOP,) == whole.shape
    assert torch.allclose(got, whole, atol=1e-4 * float(whole.abs().max()))
    # The stream resets after flush: a second utterance is independent of the first.
    again = torch.cat([stream.push(mel), stream.flush()])
    assert torch.allclose(again, whole, atol=1e-4 * float(whole.abs().max()))


def test_a_frames_audio_comes_out_lookahead_frames_later() -> None:
    m = _model(blocks=4)
    look = m.args.lookahead
    assert look == 4 + 1 + 2  # a conv looks 1 frame ahead, the overlap-add 2
    stream = IstftStream(IstftRunner(m))
    mel = _mel(40)
    emitted = 0
    for t in range(40):
        emitted += stream.push(mel[:, t : t + 1]).numel()
        # After mel frames 0..t the convs have let out STFT frames 0..t - 5, whose
        # overlap-add is final up to where STFT frame t - 4 begins (256 (t - 4) - 384)...
        assert emitted == max(0, (t - 4) * HOP - (N_FFT - HOP) // 2)
        # ... so the audio of mel frames 0..t - look is whole, and no more.
        assert emitted // HOP == max(0, t + 1 - look)


def test_overlap_add_inverts_the_analysis_framing() -> None:
    """Frames cut from a wave on nn/vocoder/mel.py's grid (reflect-padded by 384, hop 256),
    windowed, overlap-add back to the same wave: the grid the loss and the mels share."""
    g = torch.Generator().manual_seed(3)
    wave = torch.randn(1, 40 * HOP, generator=g)
    pad = (N_FFT - HOP) // 2
    x = torch.nn.functional.pad(wave[:, None], (pad, pad), mode="reflect")[:, 0]
    window = torch.hann_window(N_FFT, periodic=True)
    frames = x.unfold(1, N_FFT, HOP)[:, :40] * window  # (1, 40, 1024)
    assert torch.allclose(overlap_add(frames * window, window), wave, atol=1e-5)


def test_silence_in_is_quiet_out() -> None:
    m = _model()
    wave = IstftRunner(m)(torch.full((80, 30), SILENCE))
    assert torch.isfinite(wave).all()


def test_fp16_export_round_trips_and_the_codec_loads_it_by_path(tmp_path: Path) -> None:
    m = _model()
    d = tmp_path / "vocoder-test"
    m.save(d / FILE_NAME, meta={"step": 7})
    back = IstftVocoder.load(d / FILE_NAME)
    mel = _mel(20)
    ref = IstftRunner(IstftVocoder.load(d / FILE_NAME))(mel)
    assert torch.equal(IstftRunner(back)(mel), ref)  # deterministic after fp16 rounding
    assert torch.allclose(ref, IstftRunner(m)(mel), atol=0.05 * float(ref.abs().max()))
    runner = load_vocoder(str(d))
    assert isinstance(runner, IstftRunner)
    codec = MelVQCodec.load("melvq-hibari", q=4, vocoder=runner)
    dec = CodecStreamDecoder(codec)
    assert isinstance(dec.sv, IstftStream)
    codes = np.zeros((6, 4), np.int64)
    audio = torch.cat([dec.push(codes[:3]), dec.push(codes[3:]), dec.flush()])
    whole = codec.decode(codes)
    assert torch.allclose(audio, whole, atol=1e-5 * float(whole.abs().max()))


def test_a_broken_vocoder_file_names_the_fix(tmp_path: Path) -> None:
    from voicepipe.registry import ModelError

    d = tmp_path / "vocoder-bad"
    d.mkdir()
    (d / FILE_NAME).write_bytes(b"not a checkpoint")
    with pytest.raises(ModelError, match="voicepipe models pull"):
        load_vocoder(str(d))
