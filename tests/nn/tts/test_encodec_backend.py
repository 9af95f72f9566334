import subprocess
import sys

import numpy as np
import pytest
import torch

# Installed by `make setup` with `pip install --no-deps encodec==0.1.1 einops`.
pytest.importorskip("einops")
encodec_backend = pytest.importorskip("voicepipe.nn.tts.encodec_backend")


@pytest.fixture(scope="module")
def codec():
    return encodec_backend.EncodecCodec.random(q=8, seed=0)


def _snr(ref: np.ndarray, test: np.ndarray) -> float:
    return float(10 * np.log10((ref**2).sum() / max(((ref - test) ** 2).sum(), 1e-20)))


def test_import_does_not_need_torchaudio():
    code = (
        "import sys\n"
        "from voicepipe.nn.tts.encodec_backend import EncodecCodec\n"
        "c = EncodecCodec.random(q=2)\n"
        "assert 'torchaudio' not in sys.modules\n"
        "print(c.encode([0.0] * 4800).shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "torch.Size([15, 2])"


def test_interface_shapes(codec):
    assert (codec.sample_rate, codec.frame_rate, codec.codebook_size, codec.q) == (
        24000,
        75.0,
        1024,
        8,
    )
    rng = np.random.default_rng(0)
    wave = (0.1 * rng.standard_normal(24000 + 100)).astype(np.float32)
    codes = codec.encode(wave)
    assert codes.shape == (76, 8) and codes.dtype == torch.int64
    assert int(codes.min()) >= 0 and int(codes.max()) < 1024
    assert codec.decode(codes).shape == (76 * 320,)
    assert codec.codebooks.shape == (32, 1024, 128)
    d = codec.code_distance(torch.tensor([1, 2]), torch.tensor([1, 5]), level=3)
    assert d[0] == 0 and d[1] > 0
    assert codec.frame_distance(codes[0], codes[0]) == 0


def test_stream_decoder_matches_whole_decode(codec):
    rng = np.random.default_rng(1)
    codes = torch.from_numpy(rng.integers(0, 1024, size=(60, 8)))
    whole = codec.decode(codes).numpy()
    dec = codec.stream_decoder()
    parts, i = [], 0
    while i < len(codes):
        n = int(rng.integers(1, 9))
        parts.append(dec.push(codes[i : i + n]).numpy())
        i += n
    parts.append(dec.flush().numpy())
    chunked = np.concatenate(parts)
    assert chunked.shape == whole.shape
    assert _snr(whole, chunked) >= 30.0


def test_original_checkpoint_layout_loads(tmp_path):
    # Weight-normed (weight_g / weight_v), as in encodec_24khz-d7cc33bc.th.
    orig = encodec_backend.EncodecCodec.random(q=4, seed=3, fold=False)
    keys = orig.net.state_dict().keys()
    assert any(k.endswith("weight_g") for k in keys)
    f = orig.save(tmp_path / "encodec_24khz.th")
    loaded = encodec_backend.EncodecCodec.load(f, q=4)
    codes = torch.from_numpy(np.random.default_rng(2).integers(0, 1024, size=(20, 4)))
    torch.testing.assert_close(loaded.decode(codes), orig.decode(codes), atol=1e-4, rtol=1e-4)
    # Folded checkpoints (what save writes after load) load too.
    f2 = loaded.save(tmp_path / "folded.th")
    again = encodec_backend.EncodecCodec.load(f2, q=4)
    torch.testing.assert_close(again.decode(codes), orig.decode(codes), atol=1e-4, rtol=1e-4)


def test_bad_paths_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="EnCodec"):
        encodec_backend.EncodecCodec.load(tmp_path / "missing.th")
    bad = tmp_path / "bad.th"
    torch.save({"foo": torch.zeros(1)}, bad)
    with pytest.raises(ValueError, match="not an EnCodec 24 kHz checkpoint"):
        encodec_backend.EncodecCodec.load(bad)
    with pytest.raises(ValueError):
        encodec_backend.EncodecCodec.random(q=40)
