"""Codec-LM decoding pieces: the KV-cached target and proposer, checkpoints, alignment.

``CodecLMTarget`` / ``CodecLMProposer`` put the codec LM and its draft behind
the speculation protocols of ``voicepipe.speculative`` (``Target`` with ``Levels``,
``Proposer``), so the codec LM runs the same ``SpeculativeDecoder`` as the
text LLM. Tokens are frames' level-0 codes after a start symbol (``bos``): the
input at position t is the code of frame t-1. Each object keeps the level-0
inputs its cache was built from and, on every call, re-uses the longest prefix
that still matches (rollback = overwrite from there), so rejected drafts cost
nothing but the positions they occupied. The KV caches belong to these
per-utterance objects, never to the models, so one loaded ``TTSModels`` serves
every session (nn/tts/codec_tts.py ``CodecLMTTS.shared``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from voicepipe.nn.tts.codec_lm import CodecLM, ModelArgs
from voicepipe.nn.tts.duration import DurArgs, DurationPredictor
from voicepipe.nn.tts.phonemes import FrameAlign, align
from voicepipe.speculative.types import Proposal, Scores


class Cached:
    """Shared bookkeeping: the cache holds positions 0..len(inputs)-1 built from inputs.

    The KV cache belongs to this object (one utterance), not to the model, so any
    number of utterances and sessions decode concurrently over one loaded model."""

    def __init__(self, model: CodecLM, cond: torch.Tensor) -> None:
        self.model = model
        self.cond = cond  # (1, T, d)
        self.inputs: list[int] = []
        self.cache = model.new_cache(cond.shape[1] + 16)

    def _valid(self, wanted: list[int]) -> int:
        n = 0
        for a, b in zip(self.inputs, wanted, strict=False):
            if a != b:
                break
            n += 1
        return n

    def rows(self, wanted: list[int]) -> tuple[int, list[int], torch.Tensor]:
        """What a pass must compute for the cache to hold ``wanted``: (first position, its
        level-0 inputs from there, their conditioning (1, S, d))."""
        n = self._valid(wanted)
        new = wanted[n:]
        if not new:  # the last position is needed again: recompute it
            n -= 1
            new = wanted[n:]
        t = self.cond.shape[1]
        cond = self.cond[:, min(n, t - 1) : n + len(new)]
        if cond.shape[1] < len(new):  # past the last aligned frame: repeat it
            pad = self.cond[:, -1:].expand(1, len(new) - cond.shape[1], -1)
            cond = torch.cat([cond, pad], 1)
        return n, new, cond

    def run(self, wanted: list[int]) -> torch.Tensor:
        """Make the cache hold ``wanted``; return hidden states (S, d) of the new positions."""
        n, new, cond = self.rows(wanted)
        x = torch.tensor([new], dtype=torch.long)
        h = self.model(x, cond, pos=n, cache=self.cache)[0]
        self.inputs = list(wanted)
        return h


class CodecLMProposer(Cached):
    """The small codec LM drafting level-0 codes (sampled at ``temperature``, its
    distributions then given for the exact and relaxed rules)."""

    name = "codec-draft"

    def __init__(
        self, model: CodecLM, cond: torch.Tensor, temperature: float = 0.0, seed: int = 0
    ) -> None:
        super().__init__(model, cond)
        self.temperature = temperature
        self.gen = torch.Generator().manual_seed(seed)

    def reset(self) -> None:
        self.inputs = []

    @torch.inference_mode()
    def propose(self, context: list[int], k: int) -> Proposal:
        """``context``: the start symbol and every code emitted so far."""
        wanted = list(context)
        drafts: list[int] = []
        probs: list[np.ndarray] = []
        for _ in range(k):
            c = self.pick(self.run(wanted)[-1:], probs)
            drafts.append(c)
            wanted = [*wanted, c]
        return self.proposal(drafts, probs)

    def pick(self, h: torch.Tensor, probs: list[np.ndarray]) -> int:
        """The next draft code from the last position's hidden state h (1, d); sampled
        drafts append their distribution to ``probs``."""
        logits = self.model.logits0(h)[0].float()
        if self.temperature > 0:
            p = torch.softmax(logits / self.temperature, -1)
            probs.append(p.numpy())
            return int(torch.multinomial(p, 1, generator=self.gen))
        return int(logits.argmax())

    @staticmethod
    def proposal(drafts: list[int], probs: list[np.ndarray]) -> Proposal:
        return Proposal(tokens=drafts, probs=np.stack(probs) if probs else None)


class CodecLMTarget(Cached):
    """The codec LM as a speculation target: scores level-0 codes, and gives every
    emitted frame its deeper codebook levels from its own hidden state (``levels``).
    Its cache starts empty: ``prefill`` returns None, and the first step scores the
    start symbol with the first drafts."""

    tree = False

    def __init__(
        self, model: CodecLM, cond: torch.Tensor, deep_temperature: float = 0.0, seed: int = 0
    ) -> None:
        super().__init__(model, cond)
        self.deep_temperature = deep_temperature
        self.gen = torch.Generator().manual_seed(seed + 1)
        self._h: torch.Tensor | None = None

    @property
    def bos(self) -> int:
        return self.model.args.bos

    @property
    def length(self) -> int:
        return len(self.inputs)

    def prefill(self, tokens: list[int]) -> None:
        if tokens != [self.bos]:
            raise ValueError("a codec-LM utterance starts from the start symbol alone")
        self.inputs = []
        return None

    @torch.inference_mode()
    def score(self, tokens: list[int], parents: list[int] | None = None) -> Scores:
        if parents is not None:
            raise ValueError("the codec LM scores chains, not trees")
        return self.scored(self.run([*self.inputs, *tokens])[-len(tokens) :])  # (K+1, d)

    def scored(self, h: torch.Tensor) -> Scores:
        """Scores of a pass's rows h (K+1, d), kept for ``levels``."""
        self._h = h
        return Scores(self.model.logits0(h).float().numpy())

    def rollback(self, length: int) -> None:
        self.inputs = self.inputs[:length]

    def move(self, src: int, dst: int) -> None:  # pragma: no cover - never a tree
        raise NotImplementedError

    @torch.inference_mode()
    def levels(self, tokens: list[int]) -> np.ndarray:
        """(N, Q) codes of the N frames the last step emitted (rows 0…N-1 of its pass)."""
        assert self._h is not None
        h = self._h[: len(tokens)]
        c0 = torch.tensor(tokens, dtype=torch.long)
        return self.model.sample_deep(h, c0, self.deep_temperature, self.gen).numpy()


# -- checkpoints --------------------------------------------------------------------------
@dataclass
class TTSModels:
    target: CodecLM
    draft: CodecLM
    duration: DurationPredictor


def load_models(path: str | Path) -> TTSModels:
    """A directory with target.pt, draft.pt, duration.pt (fp16 state dicts) and config.json."""
    d = Path(path)
    cfg = json.loads((d / "config.json").read_text())
    target = CodecLM(ModelArgs(**cfg["target"]))
    draft = CodecLM(ModelArgs(**cfg["draft"]))
    duration = DurationPredictor(DurArgs(**cfg["duration"]))
    for m, name in ((target, "target"), (draft, "draft"), (duration, "duration")):
        f = d / f"{name}.pt"
        if not f.exists():
            raise FileNotFoundError(f"{f} missing; run `voicepipe models pull codec-lm-hibari`")
        state = torch.load(f, map_location="cpu", weights_only=True)
        m.load_state_dict({k: v.float() for k, v in state.items()})
        m.eval()
    return TTSModels(target, draft, duration)


def load_training_checkpoints(lm_ckpt: str | Path, dur_ckpt: str | Path | None = None) -> TTSModels:
    """Models straight from `voicepipe train tts` checkpoints (for evaluating a run); no
    ``dur_ckpt``: the shipped model's duration predictor."""
    lm = torch.load(lm_ckpt, map_location="cpu", weights_only=False)
    target = CodecLM(ModelArgs(**lm["args"]["target"]))
    draft = CodecLM(ModelArgs(**lm["args"]["draft"]))
    target.load_state_dict(lm["models"]["target"])
    draft.load_state_dict(lm["models"]["draft"])
    if dur_ckpt:
        du = torch.load(dur_ckpt, map_location="cpu", weights_only=False)
        duration = DurationPredictor(DurArgs(**du["args"]["duration"]))
        duration.load_state_dict(du["models"]["duration"])
    else:
        from voicepipe import registry

        duration = load_models(registry.resolve("codec-lm-hibari")).duration
    return TTSModels(target.eval(), draft.eval(), duration.eval())


def conditioning(model: CodecLM, ids: list[int], al: FrameAlign) -> torch.Tensor:
    """Per-frame conditioning (1, T, d) for one utterance."""
    with torch.inference_mode():
        t = torch.from_numpy
        return model.condition(
            torch.tensor([ids]),
            t(al.index)[None],
            t(al.ahead)[None],
            t(al.progress)[None],
            t(al.dur_bucket)[None],
        )


def plan(
    models: TTSModels, ids: list[int], durations: list[int] | None = None, pace: float = 1.0
) -> tuple[list[int], FrameAlign]:
    """Durations (predicted unless given, e.g. the teacher's) and the frame alignment."""
    if durations is None:
        durations = models.duration.predict(ids, pace)
    return durations, align(durations)
