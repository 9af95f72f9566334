import numpy as np
import pytest
import torch

from voicepipe.nn.vocoder import mel


def test_slaney_scale_anchor_points():
    # Slaney: linear 3 mels / 200 Hz up to 1 kHz (= mel 15), then log with 27 mels per ln(6.4).
    assert mel.hz_to_mel(np.array(1000.0)) == pytest.approx(15.0)
    assert mel.hz_to_mel(np.array(200.0)) == pytest.approx(3.0)
    assert mel.hz_to_mel(np.array(6400.0)) == pytest.approx(15.0 + 27.0)
    f = np.array([0.0, 50.0, 999.0, 1000.0, 4321.0, 8000.0])
    np.testing.assert_allclose(mel.mel_to_hz(mel.hz_to_mel(f)), f, atol=1e-9)


def test_filterbank_shape_and_slaney_area():
    fb = mel.mel_filterbank()
    assert fb.shape == (80, 513)
    assert (fb >= 0).all()
    # Every filter is non-empty at this resolution and sits below fmax.
    assert (fb.max(axis=1) > 0).all()
    freqs = np.linspace(0, 11025, 513)
    assert fb[:, freqs > 8000 + 22].sum() == 0
    # Slaney normalisation gives each triangle unit area in Hz (sampled on the FFT grid).
    df = freqs[1]
    area = fb.sum(axis=1) * df
    np.testing.assert_allclose(area[10:], 1.0, rtol=0.1)
    assert abs(area[10:].mean() - 1.0) < 0.02
    # Centres rise monotonically.
    assert (np.diff(fb.argmax(axis=1)) >= 0).all()


def test_log_mel_matches_numpy_reference():
    rng = np.random.default_rng(0)
    n = 22050 // 2 + 77
    x = (0.1 * rng.standard_normal(n)).astype(np.float32)
    out = mel.log_mel(torch.from_numpy(x))
    assert out.shape == (80, n // 256)
    # Independent reference: reflect pad, Hann frames, rfft magnitude, filterbank, log clamp.
    xp = np.pad(x.astype(np.float64), (384, 384), mode="reflect")
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(1024) / 1024)
    fb = mel.mel_filterbank().astype(np.float64)
    for t in (0, 5, out.shape[1] - 1):
        frame = xp[t * 256 : t * 256 + 1024] * win
        mag = np.sqrt(np.abs(np.fft.rfft(frame)) ** 2 + 1e-9)
        ref = np.log(np.maximum(fb @ mag, 1e-5))
        np.testing.assert_allclose(out[:, t].numpy(), ref, atol=2e-3)


def test_sine_peaks_in_matching_band_and_batch_agrees():
    t = np.arange(22050) / 22050
    tone = 0.5 * np.sin(2 * np.pi * 1000.0 * t).astype(np.float32)
    m = mel.log_mel(torch.from_numpy(tone))
    centres = mel.mel_to_hz(np.linspace(mel.hz_to_mel(0.0), mel.hz_to_mel(8000.0), 82))[1:-1]
    peak = int(m[:, 10:-10].mean(dim=1).argmax())
    assert abs(centres[peak] - 1000.0) < 60.0
    silence = torch.zeros(22050)
    assert torch.allclose(mel.log_mel(silence), torch.full((80, 86), np.log(1e-5)), atol=1e-3)
    batch = torch.stack([torch.from_numpy(tone), silence])
    mb = mel.log_mel(batch)
    assert mb.shape == (2, 80, 86)
    assert torch.allclose(mb[0], m, atol=1e-5)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError):
        mel.log_mel(torch.zeros(100))
    with pytest.raises(ValueError):
        mel.log_mel(torch.zeros(2, 2, 2000))
    with pytest.raises(ValueError):
        mel.log_mel(torch.zeros(2000, dtype=torch.int16))
    assert mel.n_frames(22050) == 86
