"""Streaming and inference wrappers of the iSTFT vocoder (nn/vocoder/istft_vocoder.py).

``IstftStream`` takes mel frames as they come and returns the audio that is final:
each conv keeps its last ``LEFT + RIGHT`` inputs (its initial state is the
whole-utterance pass's left padding, and ``flush`` feeds each conv its right
padding, layer after layer), and the overlap-add keeps the samples later frames
still add to, with the summed squared window beside them. So chunked output is
the whole-utterance output up to float rounding (tested), and a frame's audio
comes out ``IstftArgs.lookahead`` frames after it.

``IstftRunner`` is the vocoder as the codec calls it (``runner(mel) → wave``,
``hop``, ``sample_rate``), like ``hifigan.Vocoder``. Weights are shared: a stream's
state is only its buffers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from voicepipe.nn.vocoder.istft_vocoder import LEFT, RIGHT, SILENCE, IstftVocoder
from voicepipe.nn.vocoder.mel import HOP, N_FFT, PAD, SAMPLE_RATE

_KEEP = LEFT + RIGHT  # inputs a conv needs before its next new one


class IstftRunner:
    """mel (80, T) or (B, 80, T) → wave (T · 256,) or (B, T · 256), float32, no grad."""

    hop = HOP
    sample_rate = SAMPLE_RATE
    dtype = "fp32"
    fast = False  # not HiFi-GAN's FastGenerator: nothing to prepack
    max_threads = 1  # small matrices: a second thread's wake-ups cost more than it gives

    def __init__(self, model: IstftVocoder) -> None:
        self.model = model.eval()

    @torch.inference_mode()
    def __call__(self, mel: Tensor) -> Tensor:
        return self.model(mel.float())


class IstftStream:
    def __init__(self, runner: IstftRunner) -> None:
        self.m = runner.model
        self.reset()

    def reset(self) -> None:
        m = self.m
        c = m.args.channels
        self._bufs = [torch.full((1, m.conv_in.in_channels, LEFT), SILENCE)]
        self._bufs += [torch.zeros(1, c, LEFT) for _ in m.blocks]
        self._frames_in = 0  # mel frames pushed
        self._next = 0  # index of the next STFT frame out of the stack
        self._acc = torch.zeros(0)  # overlap-add sums for samples [_start, _start + len)
        self._wsum = torch.zeros(0)
        self._start = -PAD  # sample of _acc[0]; frame i covers [256 i − 384, 256 i + 640)

    def _layer(self, i: int, x: Tensor) -> Tensor:
        z = torch.cat([self._bufs[i], x], 2)
        self._bufs[i] = z[:, :, -_KEEP:]
        if z.shape[2] <= _KEEP:
            c = self.m.args.channels
            return torch.zeros(1, c, 0)
        return self.m.conv_in_valid(z) if i == 0 else self.m.block(i - 1).valid(z)

    def _stack(self, mel: Tensor | None) -> Tensor:
        """New mel frames through every conv; with None, each conv's right padding."""
        h = mel if mel is not None else torch.zeros(1, self._bufs[0].shape[1], 0)
        for i in range(len(self._bufs)):
            if mel is None:  # flush: what the earlier layers let out, then this one's pad
                pad = torch.full((1, self._bufs[i].shape[1], RIGHT), SILENCE if i == 0 else 0.0)
                h = torch.cat([h, pad], 2)
            h = self._layer(i, h)
        return h

    def _add(self, h: Tensor) -> None:
        n = h.shape[2]
        if n == 0:
            return
        frames = self.m.frames(h)  # (1, n, 1024)
        length = (n - 1) * HOP + N_FFT
        seg = F.fold(frames.transpose(1, 2), (1, length), (1, N_FFT), stride=(1, HOP)).reshape(-1)
        w2 = (self.m.window**2).reshape(1, N_FFT, 1).expand(1, N_FFT, n)
        wseg = F.fold(w2, (1, length), (1, N_FFT), stride=(1, HOP)).reshape(-1)
        off = self._next * HOP - PAD - self._start
        grow = off + length - self._acc.numel()
        if grow > 0:
            self._acc = torch.cat([self._acc, torch.zeros(grow)])
            self._wsum = torch.cat([self._wsum, torch.zeros(grow)])
        self._acc[off : off + length] += seg
        self._wsum[off : off + length] += wseg
        self._next += n

    def _emit(self, end: int) -> Tensor:
        """Samples [max(_start, 0), end) out of the overlap-add, dropped from it."""
        cut = end - self._start
        if cut <= 0:
            return torch.zeros(0)
        out = self._acc[:cut] / self._wsum[:cut].clamp_min(1e-8)
        self._acc, self._wsum = self._acc[cut:], self._wsum[cut:]
        skip = max(0, -self._start)  # the 384 samples before the utterance
        self._start = end
        return out[skip:]

    @torch.inference_mode()
    def push(self, mel: Tensor) -> Tensor:
        """(80, n) mel frames → the audio now final (possibly empty), float32."""
        if mel.shape[-1] == 0:
            return torch.zeros(0)
        self._frames_in += mel.shape[-1]
        self._add(self._stack(mel.float().reshape(1, mel.shape[-2], -1)))
        # Samples before the next frame's first one get nothing more.
        end = self._next * HOP - PAD
        return self._emit(end) if end > 0 else torch.zeros(0)

    @torch.inference_mode()
    def flush(self) -> Tensor:
        """The rest of the audio (up to 256 samples per pushed frame); the stream resets."""
        if self._frames_in == 0:
            self.reset()
            return torch.zeros(0)
        self._add(self._stack(None))
        out = self._emit(self._frames_in * HOP)
        self.reset()
        return out
