"""MelVQ: the project's low-frame-rate audio codec (docs/DESIGN.md §7).

    wave 22,050 Hz ─► log-mel (80 × 86.13 Hz, exactly HiFi-GAN's) ─► stack 4 frames
    ─► 320-dim vector per step (21.53 steps/s, 46.4 ms) ─► residual VQ, Q levels × 1024
    codes (T, Q) ─► sum of code vectors ─► (80, 4T) mel ─► HiFi-GAN ─► wave

API (what the TTS, stages and benches use):

    codec = MelVQCodec.load("melvq-hibari", q=4)   # model name, directory or file
    codes = codec.encode(wave_22k)                  # LongTensor (T, Q); encode_all: every level
    mel = codec.decode_mel(codes)                   # (80, 4T)
    wave = codec.decode(codes)                      # (4T · 256,) float32, needs the vocoder
    dec = codec.stream_decoder(); dec.push(codes_n) → audio chunk …; dec.flush()
    codec.q, codec.levels, codec.codebook_size, codec.frame_rate, codec.sample_rate
    codec.code_distance(a, b, level); codec.frame_distance(codes_a, codes_b)

Tail: the wave is padded with silence up to a whole number of steps, so T =
ceil(N / 1024) and ``decode`` returns at most 1023 samples of silence more
than went in. Inputs may be numpy arrays or tensors.

Distances are RMS per mel bin in natural-log units (Euclidean / √320), so a
distance of 0.5 means the two code vectors differ by about 0.5 nepers (≈ 4 dB)
per mel bin on average; the acoustic tolerance rule (§6) compares it with β.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from voicepipe.nn.vocoder.mel import HOP, LOG_FLOOR, N_MELS, SAMPLE_RATE, log_mel

STACK = 4  # mel frames per codec step
DIM = STACK * N_MELS  # 320
STEP_SAMPLES = STACK * HOP  # 1024 samples = 46.4 ms
SILENCE = math.log(LOG_FLOOR)
FILE_NAME = "codebooks.pt"


class Codec(Protocol):
    """What every codec backend offers (MelVQ here, EnCodec in encodec_backend.py)."""

    q: int
    codebook_size: int
    frame_rate: float
    sample_rate: int

    def encode(self, wave) -> torch.Tensor: ...  # (N,) at sample_rate → (T, q) int64

    def decode(self, codes) -> torch.Tensor: ...  # (T, q) → (N',) float32

    def stream_decoder(self): ...  # .push((n, q) codes) → audio chunk; .flush() → tail


def stack_mel(mel: torch.Tensor) -> torch.Tensor:
    """(80, 4T) → (T, 320): frame-major within a step ([f0 bins, f1 bins, f2, f3])."""
    t4 = mel.shape[-1]
    if t4 % STACK:
        raise ValueError(f"mel length {t4} is not a multiple of {STACK}")
    return mel.transpose(0, 1).reshape(t4 // STACK, DIM)


def unstack_mel(vecs: torch.Tensor) -> torch.Tensor:
    """(..., T, 320) → (..., 80, 4T)."""
    *lead, t, _ = vecs.shape
    return vecs.reshape(*lead, t * STACK, N_MELS).transpose(-1, -2)


def wave_to_steps(wave) -> torch.Tensor:
    """(N,) float wave at 22,050 Hz → (T, 320) stacked log-mel, T = ceil(N / 1024)."""
    w = (
        torch.as_tensor(np.asarray(wave, dtype=np.float32) if not torch.is_tensor(wave) else wave)
        .float()
        .reshape(-1)
    )
    if w.numel() == 0:
        return torch.zeros(0, DIM)
    t = -(-w.numel() // STEP_SAMPLES)
    w = torch.nn.functional.pad(w, (0, t * STEP_SAMPLES - w.numel()))
    return stack_mel(log_mel(w))


def rvq_encode(x: torch.Tensor, codebooks: torch.Tensor) -> torch.Tensor:
    """Greedy residual VQ. x (T, D), codebooks (L, K, D) → codes (T, L) int64."""
    r = x.clone()
    codes = torch.empty(x.shape[0], codebooks.shape[0], dtype=torch.long)
    for lvl, cb in enumerate(codebooks):
        # argmin ‖r − c‖² = argmin (‖c‖² − 2 r·c)
        d = (cb * cb).sum(-1)[None, :] - 2.0 * (r @ cb.T)  # (T, K)
        idx = d.argmin(dim=1)
        codes[:, lvl] = idx
        r = r - cb[idx]
    return codes


class MelVQCodec:
    def __init__(
        self,
        codebooks: torch.Tensor,
        *,
        q: int | None = None,
        vocoder=None,
        vocoder_name: str = "hifigan-universal",
        meta: dict | None = None,
    ) -> None:
        if codebooks.dim() != 3 or codebooks.shape[-1] != DIM:
            raise ValueError(f"codebooks must be (levels, K, {DIM}), got {tuple(codebooks.shape)}")
        self.codebooks = codebooks.float().contiguous()  # (L, K, 320), all trained levels
        self.levels = codebooks.shape[0]
        q = self.levels if q is None else int(q)
        if not 1 <= q <= self.levels:
            raise ValueError(f"q={q} but the codec has {self.levels} levels")
        self.q = q
        self.codebook_size = codebooks.shape[1]
        self.sample_rate = SAMPLE_RATE
        self.frame_rate = SAMPLE_RATE / STEP_SAMPLES  # 21.53 steps per second
        self.step_samples = STEP_SAMPLES
        self.meta = dict(meta or {})
        self._vocoder = vocoder
        self._vocoder_name = vocoder_name
        self._dist: dict[int, torch.Tensor] = {}

    # -- persistence -------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path_or_name: str | Path = "melvq-hibari",
        *,
        q: int | None = 4,
        vocoder=None,
        vocoder_name: str = "hifigan-universal",
    ) -> MelVQCodec:
        """From a model name (registry), a directory holding codebooks.pt, or the file itself.

        ``q=None`` uses every trained level.
        """
        from voicepipe import registry

        p = registry.resolve(str(path_or_name))
        f = p / FILE_NAME if p.is_dir() else p
        try:
            blob = torch.load(f, map_location="cpu", weights_only=True)
            cb = blob["codebooks"]
        except Exception as e:
            raise registry.ModelError(
                f"{f}: cannot load MelVQ codebooks ({e}); train them with "
                "'voicepipe train codec' or restore models/melvq-hibari/ from git"
            ) from e
        meta = {k: v for k, v in blob.items() if k != "codebooks"}
        if (
            int(meta.get("stack", STACK)) != STACK
            or int(meta.get("sample_rate", SAMPLE_RATE)) != SAMPLE_RATE
        ):
            raise registry.ModelError(f"{f}: codebooks for a different mel layout ({meta})")
        return cls(cb, q=q, vocoder=vocoder, vocoder_name=vocoder_name, meta=meta)

    def save(self, path: str | Path, *, dtype: torch.dtype = torch.float16) -> Path:
        p = Path(path)
        f = p / FILE_NAME if p.suffix != ".pt" else p
        f.parent.mkdir(parents=True, exist_ok=True)
        blob = {
            **self.meta,
            "codebooks": self.codebooks.to(dtype),
            "stack": STACK,
            "sample_rate": SAMPLE_RATE,
        }
        torch.save(blob, f)
        return f

    def with_q(self, q: int) -> MelVQCodec:
        """Same codebooks and vocoder, another number of levels in use."""
        c = MelVQCodec(
            self.codebooks,
            q=q,
            vocoder=self._vocoder,
            vocoder_name=self._vocoder_name,
            meta=self.meta,
        )
        return c

    # -- encode / decode ---------------------------------------------------------------------
    @torch.inference_mode()
    def encode(self, wave) -> torch.Tensor:
        """(N,) float wave at 22,050 Hz → (T, q) int64 codes, T = ceil(N / 1024)."""
        return rvq_encode(wave_to_steps(wave), self.codebooks[: self.q])

    @torch.inference_mode()
    def encode_all(self, wave) -> torch.Tensor:
        """(N,) → (T, levels): every trained level (slice [:, :q] for any smaller q)."""
        return rvq_encode(wave_to_steps(wave), self.codebooks)

    def vectors(self, codes) -> torch.Tensor:
        """(..., T, Q') codes → (..., T, 320) summed code vectors; Q' ≤ levels."""
        c = torch.as_tensor(np.asarray(codes) if not torch.is_tensor(codes) else codes).long()
        if c.shape[-1] > self.levels:
            raise ValueError(f"codes have {c.shape[-1]} levels, codec has {self.levels}")
        if c.numel() and (int(c.min()) < 0 or int(c.max()) >= self.codebook_size):
            raise ValueError(f"codes outside [0, {self.codebook_size})")
        out = torch.zeros(*c.shape[:-1], DIM)
        for lvl in range(c.shape[-1]):
            out = out + self.codebooks[lvl][c[..., lvl]]
        return out

    def decode_mel(self, codes) -> torch.Tensor:
        """(T, Q') → (80, 4T), or (B, T, Q') → (B, 80, 4T) log-mel."""
        return unstack_mel(self.vectors(codes))

    @property
    def vocoder(self):
        if self._vocoder is None:
            self._vocoder = load_vocoder(self._vocoder_name)
        return self._vocoder

    def decode(self, codes) -> torch.Tensor:
        """(T, Q') → (4T · 256,) float32 wave at 22,050 Hz."""
        mel = self.decode_mel(codes)
        if mel.shape[-1] == 0:
            return torch.zeros(0)
        return self.vocoder(mel)

    def stream_decoder(
        self, *, left: int = 12, lookahead: int = 12, exact: bool = True
    ) -> CodecStreamDecoder:
        """Streaming decoder; ``exact`` (default, needs the fast vocoder): cached conv
        state, no recomputed context (nn/vocoder/hifigan_stream.py); else ``left``/``lookahead``
        frames of overlap per chunk (hifigan.StreamingVocoder)."""
        return CodecStreamDecoder(self, left=left, lookahead=lookahead, exact=exact)

    # -- distances (acoustic tolerance rule) -------------------------------------------------
    def code_distance(self, a, b, level: int = 0) -> torch.Tensor:
        """RMS distance per mel bin between code vectors of tokens a and b at one level.

        a, b: ints or broadcastable LongTensors of token ids.
        """
        cb = self.codebooks[level]
        va = cb[torch.as_tensor(a).long()]
        vb = cb[torch.as_tensor(b).long()]
        return (va - vb).square().mean(-1).sqrt()

    def frame_distance(self, codes_a, codes_b) -> torch.Tensor:
        """RMS distance per mel bin between the decoded vectors of two (..., Q') frames."""
        return (self.vectors(codes_a) - self.vectors(codes_b)).square().mean(-1).sqrt()

    def normalized_distance_matrix(self, level: int = 0) -> np.ndarray:
        """distance_matrix over its mean (a unitless β for the acoustic rule); cached,
        so every TTS session sharing this codec shares one 4 MB matrix."""
        key = -1 - level
        if key not in self._dist:
            d = self.distance_matrix(level)
            self._dist[key] = d / d.mean()
        return self._dist[key].numpy()

    def distance_matrix(self, level: int = 0) -> torch.Tensor:
        """(K, K) code_distance of every pair at ``level`` (cached; 4 MB per level)."""
        if level not in self._dist:
            cb = self.codebooks[level].double()
            sq = (cb * cb).sum(-1)
            d2 = (sq[:, None] + sq[None, :] - 2.0 * cb @ cb.T).clamp_min(0.0) / DIM
            self._dist[level] = d2.sqrt().float()
        return self._dist[level]


class CodecStreamDecoder:
    """Codes frame by frame (or in blocks) → audio chunks; seams match whole-utterance decode.

    Wraps ``IstftStream`` for the frame-rate iSTFT vocoder (audio for a mel frame
    comes out 9 frames later), ``ExactStreamingVocoder`` for HiFi-GAN (each conv
    keeps its own left context; audio for a mel frame comes out once about 12
    further frames have arrived) or, with
    ``exact=False`` or a vocoder that is not the fast generator, ``StreamingVocoder``
    (audio for a step is emitted once ``lookahead`` further mel frames have arrived,
    ``left`` frames of context re-synthesized per chunk). ``flush`` emits the rest.
    Chunks are float32 at 22,050 Hz.
    """

    def __init__(
        self, codec: MelVQCodec, *, left: int = 12, lookahead: int = 12, exact: bool = True
    ) -> None:
        from voicepipe.nn.vocoder.hifigan import FastGenerator, StreamingVocoder
        from voicepipe.nn.vocoder.hifigan_stream import ExactStreamingVocoder
        from voicepipe.nn.vocoder.istft_stream import IstftRunner, IstftStream

        self.codec = codec
        voc = codec.vocoder
        self.sv: IstftStream | ExactStreamingVocoder | StreamingVocoder
        if isinstance(voc, IstftRunner):
            self.sv = IstftStream(voc)  # always exact: its convs keep their own state
        elif exact and isinstance(getattr(voc, "model", None), FastGenerator):
            self.sv = ExactStreamingVocoder(voc)
        else:
            self.sv = StreamingVocoder(voc, left=left, lookahead=lookahead)

    def push(self, codes) -> torch.Tensor:
        c = torch.as_tensor(np.asarray(codes) if not torch.is_tensor(codes) else codes)
        if c.dim() == 1:
            c = c[None]  # one frame
        if c.shape[0] == 0:
            return torch.zeros(0)
        return self.sv.push(self.codec.decode_mel(c))

    def flush(self) -> torch.Tensor:
        return self.sv.flush()

    def reset(self) -> None:
        self.sv.reset()


def load_vocoder(name: str):
    """The vocoder a name (``codec.vocoder``), directory or file holds: HiFi-GAN
    (``hifigan-universal``) or the frame-rate iSTFT vocoder (``vocoder-hibari``)."""
    from voicepipe import registry
    from voicepipe.nn.vocoder.istft_vocoder import FILE_NAME, IstftVocoder, is_istft_vocoder

    p = registry.resolve(str(name))
    if is_istft_vocoder(p):
        from voicepipe.nn.vocoder.istft_stream import IstftRunner

        try:
            return IstftRunner(IstftVocoder.load(p / FILE_NAME if p.is_dir() else p))
        except Exception as e:  # truncated, not a checkpoint, other arrays: name the fix
            raise registry.ModelError(
                f"{p}: cannot load the iSTFT vocoder ({e}); fetch it again with: "
                f"voicepipe models pull {name} --force"
            ) from e
    from voicepipe.nn.vocoder.hifigan import Vocoder, load_generator

    return Vocoder(load_generator(p))


def from_config(cfg, *, q: int | None = None) -> Codec:
    """The codec a ``CodecConfig`` names (backend melvq | encodec); ``q`` overrides cfg.q."""
    q = cfg.q if q is None else q
    if cfg.backend == "melvq":
        return MelVQCodec.load(cfg.model, q=q, vocoder_name=cfg.vocoder)
    if cfg.backend == "encodec":
        from voicepipe.nn.tts.encodec_backend import EncodecCodec

        if not cfg.encodec_path:
            raise ValueError(
                "codec.backend=encodec needs --codec.encodec_path=FILE "
                "(EnCodec 24 kHz weights, e.g. encodec_24khz-d7cc33bc.th)"
            )
        return EncodecCodec.load(cfg.encodec_path, q=q)
    raise ValueError(f"unknown codec.backend {cfg.backend!r} (melvq | encodec)")
