import warnings

import numpy as np
import pytest
import torch

from voicepipe import registry
from voicepipe.nn.vocoder import hifigan
from voicepipe.nn.vocoder.mel import log_mel


def _speech(text: str, seed: int = 0) -> np.ndarray:
    from hibari import Hibari

    from voicepipe.audio import resample

    return resample(np.asarray(Hibari()(text, seed=seed), dtype=np.float32), 24000, 22050)


@pytest.fixture(scope="module")
def vocoder() -> hifigan.Vocoder:
    torch.set_num_threads(2)
    return hifigan.Vocoder(hifigan.load_generator("hifigan-universal"), dtype="fp32")


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return _speech("Turn left at the second light.")


def _snr(ref: np.ndarray, test: np.ndarray) -> float:
    return float(10 * np.log10((ref**2).sum() / max(((ref - test) ** 2).sum(), 1e-20)))


def test_fold_weight_norm_matches_weight_norm_module():
    torch.manual_seed(0)
    with warnings.catch_warnings():  # the old API is the one that names weight_g / weight_v
        warnings.simplefilter("ignore", FutureWarning)
        conv = torch.nn.utils.weight_norm(torch.nn.Conv1d(6, 5, 3, padding=1))
        convt = torch.nn.utils.weight_norm(torch.nn.ConvTranspose1d(6, 4, 4, 2, padding=1))
    with torch.no_grad():
        conv.weight_g.mul_(torch.rand_like(conv.weight_g) + 0.5)
        convt.weight_g.mul_(torch.rand_like(convt.weight_g) + 0.5)
    folded = hifigan.fold_weight_norm({f"a.{k}": v for k, v in conv.state_dict().items()})
    foldedt = hifigan.fold_weight_norm({f"b.{k}": v for k, v in convt.state_dict().items()})
    assert set(folded) == {"a.weight", "a.bias"}
    plain = torch.nn.Conv1d(6, 5, 3, padding=1)
    plain.load_state_dict({"weight": folded["a.weight"], "bias": folded["a.bias"]})
    plaint = torch.nn.ConvTranspose1d(6, 4, 4, 2, padding=1)
    plaint.load_state_dict({"weight": foldedt["b.weight"], "bias": foldedt["b.bias"]})
    x = torch.randn(2, 6, 11)
    torch.testing.assert_close(plain(x), conv(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(plaint(x), convt(x), atol=1e-5, rtol=1e-5)


def test_small_random_generator_shapes():
    args = hifigan.ModelArgs(
        upsample_initial_channel=16,
        upsample_rates=(4, 4),
        upsample_kernel_sizes=(8, 8),
        hop_size=16,
    )
    g = hifigan.Generator(args).eval()
    y = g(torch.randn(3, 80, 7))
    assert y.shape == (3, 7 * 16)
    assert y.abs().max() <= 1.0


def test_universal_checkpoint_resynthesizes_speech(vocoder, speech):
    mel = log_mel(torch.from_numpy(speech))
    wave = vocoder(mel)
    assert wave.shape == (mel.shape[1] * 256,)
    # Resynthesis through HiFi-GAN keeps the mel close: a wrong mel recipe or a weight-norm
    # bug gives mean |Δ log-mel| above 1; the real model gives about 0.2.
    err = (log_mel(wave) - mel).abs().mean().item()
    assert err < 0.4, err
    # Batched synthesis equals per-item synthesis.
    both = vocoder(torch.stack([mel[:, :40], mel[:, 50:90]]))
    torch.testing.assert_close(both[1], vocoder(mel[:, 50:90]), atol=1e-4, rtol=1e-3)


def test_streaming_matches_whole_utterance(vocoder, speech):
    mel = log_mel(torch.from_numpy(speech))[:, :110]
    whole = vocoder(mel).numpy()
    rng = np.random.default_rng(1)
    sv = hifigan.StreamingVocoder(vocoder)
    outs, i = [], 0
    while i < mel.shape[1]:
        n = int(rng.integers(6, 30))
        outs.append(sv.push(mel[:, i : i + n]).numpy())
        i += n
    outs.append(sv.flush().numpy())
    chunked = np.concatenate(outs)
    assert chunked.shape == whole.shape
    assert _snr(whole, chunked) >= 30.0
    # Too little context is audibly different: the defaults are not accidentally generous.
    short = hifigan.StreamingVocoder(vocoder, left=2, lookahead=0)
    outs = [short.push(mel[:, j : j + 32]).numpy() for j in range(0, mel.shape[1], 32)]
    outs.append(short.flush().numpy())
    assert _snr(whole, np.concatenate(outs)) < 30.0
    # The stream is reusable after flush.
    assert len(sv.push(mel[:, :30])) == (30 - sv.lookahead) * 256


def test_fast_generator_is_the_same_function(vocoder, speech):
    mel = log_mel(torch.from_numpy(speech[:22050]))
    gen = vocoder.generator
    with torch.inference_mode():
        ref = gen(mel[None])
        fast = hifigan.FastGenerator(gen).eval()(mel[None])
    torch.testing.assert_close(fast, ref, atol=1e-4, rtol=1e-3)
    # Polyphase form of a transposed conv with another kernel, stride and padding.
    ct = torch.nn.ConvTranspose1d(3, 2, 5, 3, padding=1)
    x = torch.randn(1, 3, 9)
    y = hifigan.Polyphase(ct)(x[:, :, None, :].contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(y[:, :, 0], ct(x), atol=1e-5, rtol=1e-5)


def test_bf16_variants_stay_close(vocoder, speech):
    mel = log_mel(torch.from_numpy(speech[:22050]))
    ref = vocoder(mel)
    for kw in ({"dtype": "bf16", "fast": False}, {"dtype": "bf16-weights"}):
        out = hifigan.Vocoder(vocoder.generator, **kw)(mel)
        assert (log_mel(out) - log_mel(ref)).abs().mean().item() < 0.2, kw
    with pytest.raises(ValueError):
        hifigan.Vocoder(vocoder.generator, dtype="fp8")


def test_corrupt_checkpoint_names_the_fix(tmp_path):
    bad = tmp_path / "generator_universal.pth.tar"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(registry.ModelError, match="voicepipe models pull hifigan-universal"):
        hifigan.load_generator(tmp_path)


def _exact_chunks(sv, mel: torch.Tensor, sizes) -> np.ndarray:
    outs, i = [], 0
    for n in sizes:
        if i >= mel.shape[1]:
            break
        outs.append(sv.push(mel[:, i : i + n]).numpy())
        i += n
    if i < mel.shape[1]:
        outs.append(sv.push(mel[:, i:]).numpy())
    outs.append(sv.flush().numpy())
    return np.concatenate(outs)


def test_exact_streaming_equals_whole_utterance(vocoder, speech):
    from voicepipe.nn.vocoder.hifigan_stream import (
        ExactStreamingVocoder,
        GeneratorStream,
        StreamPlan,
    )

    mel = log_mel(torch.from_numpy(speech))[:, :150]
    whole = vocoder(mel).numpy()
    rng = np.random.default_rng(2)
    sv = ExactStreamingVocoder(vocoder)
    # Random chunk sizes including single frames: no seam, no lost or extra sample.
    chunked = _exact_chunks(sv, mel, rng.integers(1, 40, size=100))
    assert chunked.shape == whole.shape
    assert _snr(whole, chunked) >= 60.0  # fp32: equal up to float rounding
    # Reusable after flush; the first 16 frames (4 codec steps) already give audio:
    # the network's delay is 3,405 samples (13.3 frames).
    first = sv.push(mel[:, :16])
    assert len(first) == 16 * 256 - 3405
    np.testing.assert_allclose(first.numpy(), whole[: len(first)], atol=1e-4)
    sv.reset()
    # The plain conv2d path (no prepacked weights) is the same function.
    plain = GeneratorStream(StreamPlan(vocoder.model, pack=False))
    out = [plain.step(mel[:, j : j + 32]).numpy() for j in range(0, mel.shape[1], 32)]
    out.append(plain.step(None, final=True).numpy())
    assert _snr(whole, np.concatenate(out)) >= 60.0


def test_exact_streaming_bf16_stays_close_to_whole(vocoder, speech):
    from voicepipe.nn.vocoder.hifigan_stream import ExactStreamingVocoder

    mel = log_mel(torch.from_numpy(speech))[:, :120]
    bf = hifigan.Vocoder(vocoder.generator, dtype="bf16-weights")
    whole = bf(mel).numpy()
    chunked = _exact_chunks(ExactStreamingVocoder(bf), mel, [16] + [32] * 10)
    assert chunked.shape == whole.shape
    # bf16 rounds differently per input width; fp32 whole vs bf16 whole is further apart.
    assert _snr(whole, chunked) >= 25.0
    with pytest.raises(TypeError):
        ExactStreamingVocoder(hifigan.Vocoder(vocoder.generator, dtype="fp32", fast=False))
