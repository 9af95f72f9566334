import numpy as np
import pytest
import torch

from voicepipe import registry
from voicepipe.config import CodecConfig
from voicepipe.nn.tts import codec as C
from voicepipe.nn.vocoder.mel import log_mel
from voicepipe.training.codec import kmeans, train_rvq


def _snr(ref: np.ndarray, test: np.ndarray) -> float:
    return float(10 * np.log10((ref**2).sum() / max(((ref - test) ** 2).sum(), 1e-20)))


@pytest.fixture(scope="module")
def codec() -> C.MelVQCodec:
    torch.set_num_threads(2)
    return C.MelVQCodec.load("melvq-hibari", q=4)


@pytest.fixture(scope="module")
def sentence() -> tuple[str, np.ndarray]:
    from hibari import Hibari

    from voicepipe.audio import resample

    text = "Please remind me to call my sister when I get home."
    wave = np.asarray(Hibari()(text, seed=3), dtype=np.float32)
    return text, resample(wave, 24000, 22050)


def test_stacking_layout_and_tail():
    mel = torch.randn(80, 12)
    v = C.stack_mel(mel)
    assert v.shape == (3, 320)
    assert torch.equal(v[1, 80:160], mel[:, 5])  # step 1, second frame = mel frame 5
    assert torch.equal(C.unstack_mel(v), mel)
    n = 1024 * 5 + 3
    steps = C.wave_to_steps(np.random.default_rng(0).standard_normal(n).astype(np.float32) * 0.1)
    assert steps.shape == (6, 320)
    # The padded tail is silence: the last mel frame (beyond the reflect-pad reach) is the floor.
    assert torch.allclose(steps[-1, -80:], torch.full((80,), C.SILENCE), atol=1e-3)
    assert C.wave_to_steps(np.zeros(0)).shape == (0, 320)


def test_rvq_encode_is_greedy_nearest_per_level():
    g = torch.Generator().manual_seed(0)
    books = torch.randn(3, 16, 320, generator=g)
    x = torch.randn(10, 320, generator=g)
    codes = C.rvq_encode(x, books)
    r = x.clone()
    for lvl in range(3):
        brute = torch.cdist(r, books[lvl]).argmin(dim=1)
        assert torch.equal(codes[:, lvl], brute)
        r = r - books[lvl][brute]


def test_kmeans_finds_separated_clusters_and_rvq_levels_help():
    g = torch.Generator().manual_seed(1)
    centres = torch.randn(8, 4, generator=g) * 10
    x = centres.repeat_interleave(50, 0) + 0.1 * torch.randn(400, 4, generator=g)
    found = kmeans(x, 8, 10, torch.Generator().manual_seed(0))
    assert torch.cdist(centres, found).min(dim=1).values.max() < 0.5
    y = torch.randn(2000, 16, generator=g)
    books = train_rvq(y, levels=3, k=32, iters=5, seed=0)
    codes = C.rvq_encode(y, books)
    errs = []
    for q in (1, 2, 3):
        rec = sum(books[lvl][codes[:, lvl]] for lvl in range(q))
        errs.append(float((y - rec).square().mean()))
    assert errs[0] > errs[1] > errs[2]


def test_committed_codec_properties(codec):
    assert (codec.q, codec.levels, codec.codebook_size) == (4, 8, 1024)
    assert codec.frame_rate == pytest.approx(21.53, abs=0.01)
    assert codec.sample_rate == 22050
    assert codec.codebooks.shape == (8, 1024, 320)
    assert torch.isfinite(codec.codebooks).all()


def test_encode_decode_quality_improves_with_q(codec, sentence):
    _, wave = sentence
    codes = codec.encode(wave)
    assert codes.shape == (-(-len(wave) // 1024), 4) and codes.dtype == torch.int64
    assert torch.equal(codec.encode_all(wave)[:, :4], codes)
    target = C.wave_to_steps(wave)
    all_codes = codec.encode_all(wave)
    errs = [
        float((codec.vectors(all_codes[:, :q]) - target).square().mean().sqrt())
        for q in (1, 2, 4, 8)
    ]
    assert errs[0] > errs[1] > errs[2] > errs[3]
    assert errs[2] < 0.8  # RMS log-mel error per bin at Q=4 on unseen speech
    mel = codec.decode_mel(codes)
    assert mel.shape == (80, 4 * len(codes))


def test_round_trip_is_intelligible_and_streams(codec, sentence):
    from voicepipe.core.text.wer import wer
    from voicepipe.roundtrip import transcribe

    text, wave = sentence
    codes = codec.encode(wave)
    out = codec.decode(codes).numpy()
    assert out.shape == (len(codes) * 1024,)
    assert wer([text], [transcribe(out, 22050)]) <= 0.2
    # Resynthesis keeps the mel of the original within a bounded error.
    n = len(wave) // 1024 * 1024
    assert (
        log_mel(torch.from_numpy(out[:n])) - log_mel(torch.from_numpy(wave[:n]))
    ).abs().mean() < 1.0
    dec = codec.stream_decoder()
    parts = [dec.push(codes[i]) for i in range(len(codes))]  # frame by frame
    parts.append(dec.flush())
    chunked = torch.cat(parts).numpy()
    assert chunked.shape == out.shape
    assert _snr(out, chunked) >= 30.0


def test_distances(codec):
    a = torch.tensor([3, 7, 100])
    d = codec.code_distance(a, a, level=0)
    assert torch.equal(d, torch.zeros(3))
    ab = codec.code_distance(3, 7, level=1)
    assert ab > 0 and torch.isclose(ab, codec.code_distance(7, 3, level=1))
    m = codec.distance_matrix(1)
    assert m.shape == (1024, 1024)
    assert torch.isclose(m[3, 7], ab, atol=1e-4)
    # Frames that differ only at level 2 are as far apart as those two level-2 code vectors.
    fa = torch.tensor([5, 9, 11, 13])
    fb = torch.tensor([5, 9, 12, 13])
    assert torch.isclose(
        codec.frame_distance(fa, fb), codec.code_distance(11, 12, level=2), atol=1e-5
    )


def test_save_load_and_errors(codec, tmp_path):
    f = codec.save(tmp_path / "cb")
    assert f.name == "codebooks.pt"
    again = C.MelVQCodec.load(tmp_path / "cb", q=2)
    assert again.q == 2
    torch.testing.assert_close(again.codebooks, codec.codebooks, atol=1e-3, rtol=1e-3)
    with pytest.raises(ValueError):
        C.MelVQCodec.load(tmp_path / "cb", q=9)
    with pytest.raises(ValueError):
        codec.decode_mel(torch.tensor([[0, 1024, 0, 0]]))
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"garbage")
    with pytest.raises(registry.ModelError, match="voicepipe train codec"):
        C.MelVQCodec.load(bad)
    with pytest.raises(ValueError, match="encodec_path"):
        C.from_config(CodecConfig(backend="encodec"))
    assert isinstance(C.from_config(CodecConfig(q=2)), C.MelVQCodec)


def test_roundtrip_command(sentence, tmp_path, capsys):
    import json

    from voicepipe import cli
    from voicepipe.audio import read_wav, resample, write_wav

    _, wave = sentence
    src = tmp_path / "in.wav"
    write_wav(src, resample(wave[:22050], 22050, 16000), 16000)  # any input rate
    out = tmp_path / "out.wav"
    assert cli.main(["codec", "roundtrip", str(src), str(out), "--q", "2"]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["q"] == 2 and info["frames"] == 22 and info["bitrate_bps"] == 431
    pcm, sr = read_wav(out)
    assert sr == 22050 and len(pcm) == 22 * 1024
    assert cli.main(["codec", "roundtrip", str(tmp_path / "missing.wav"), str(out)]) == 1
