"""voicepipe.bench.voices: offline voices, noise at a given SNR, joined clips."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe.bench import voices as V

pytestmark = pytest.mark.skipif(
    not V.available("espeak-us-m"), reason="espeak-ng not installed (apt-get install espeak-ng)"
)

TEXT = "Set an alarm for six fifteen tomorrow morning."


def test_speak_is_deterministic_and_voices_differ() -> None:
    a = V.speak(TEXT, "espeak-us-m")
    assert a.dtype == np.float32 and a.ndim == 1
    assert np.array_equal(a, V.speak(TEXT, "espeak-us-m"))
    b = V.speak(TEXT, "espeak-rp-f3")
    assert len(a) != len(b) or not np.allclose(a, b)
    # about 2-4 s of speech at 16 kHz, trimmed: loud at both ends within 50 ms
    assert 1.5 * V.SR < len(a) < 5 * V.SR
    assert np.abs(a[: V.SR // 20]).max() > 1e-3 and np.abs(a[-V.SR // 20 :]).max() > 1e-3


def test_speak_48k_is_the_same_speech_resampled() -> None:
    a16 = V.speak(TEXT, "espeak-us-m7")
    a48 = V.speak_48k(TEXT, "espeak-us-m7")
    assert abs(len(a48) - 3 * len(a16)) <= 3


def test_unknown_voice_and_empty_text_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown voice"):
        V.speak(TEXT, "nobody")
    with pytest.raises(ValueError, match="empty"):
        V.speak("  ", "espeak-us-m")


@pytest.mark.parametrize("kind", ["pink", "brown", "babble", "cafe"])
@pytest.mark.parametrize("snr", [10.0, 20.0])
def test_mix_achieves_the_asked_snr(kind: str, snr: float) -> None:
    rng = np.random.default_rng(7)
    s = V.speak(TEXT, "espeak-scot-f2")
    n = len(s)
    others = ["espeak-us-m", "espeak-carib-m3"]
    texts = ["The bus was late again.", "Two coffees please.", "Where did you park?"]
    noise = {
        "pink": lambda: V.pink_noise(n, rng),
        "brown": lambda: V.brown_noise(n, rng),
        "babble": lambda: V.babble(n, rng, texts, others, talkers=3),
        "cafe": lambda: V.cafe(n, rng, texts, others),
    }[kind]()
    assert np.sqrt(np.mean(noise.astype(np.float64) ** 2)) == pytest.approx(1.0, rel=1e-3)
    m = V.mix_at_snr(s, noise, snr)
    assert np.abs(m).max() <= 0.99 + 1e-6
    assert V.measured_snr(s, m) == pytest.approx(snr, abs=0.2)
    # the noise really is there: the residual is as loud as the SNR says, not silent
    noise_power = float(np.mean((m.astype(np.float64) - s) ** 2))
    assert noise_power > V.speech_power(s) * 10 ** (-(snr + 3) / 10)


def test_noise_is_seeded() -> None:
    a = V.pink_noise(8000, np.random.default_rng(3))
    assert np.array_equal(a, V.pink_noise(8000, np.random.default_rng(3)))
    assert not np.array_equal(a, V.pink_noise(8000, np.random.default_rng(4)))


def test_join_places_silences() -> None:
    a = np.ones(100, np.float32)
    out = V.join([a, a, a], [0.01, 0.02])
    assert len(out) == 300 + 160 + 320
    assert out[100:260].max() == 0 and out[360:680].max() == 0
    with pytest.raises(ValueError, match="gaps"):
        V.join([a, a], [0.1, 0.1])
    with pytest.raises(ValueError, match="shorter"):
        V.mix_at_snr(a, np.ones(10, np.float32), 10)
