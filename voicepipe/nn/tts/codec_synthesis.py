"""One text's codec-LM synthesis as a state machine: LM calls go out, audio comes back.

``lm_steps`` is the codec LM's speculative decoding of a text with its model
passes left to the caller: it yields ``Draft`` / ``Verify`` calls (nn/tts/codec_lm_batch.py)
and expects their results sent back, and yields each step's (N, Q) code block.
``Synthesis`` wraps it with the streaming vocoder's bookkeeping (a first push of
``first_frames`` codec frames for time-to-first-audio, then ``chunk_frames`` at a
time, the tail in power-of-two pieces so the vocoder sees few input widths).

Two drivers: ``CodecLMTTS.stream`` runs one synthesis alone (each call as it
comes), and the TTS batcher (schedulers/tts_batch.py) runs every speaking session's
synthesis on one thread, their LM calls batched and their vocoder pushes in
order of need.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import numpy as np

from voicepipe.config import TtsConfig
from voicepipe.nn.tts.codec_lm_batch import Call, Draft, Verify, run_alone
from voicepipe.nn.tts.codec_lm_decode import CodecLMProposer, CodecLMTarget, conditioning
from voicepipe.speculative.adaptive import AdaptiveK
from voicepipe.speculative.loop import PrefillCall, ProposeCall, ScoreCall, SpeculativeDecoder
from voicepipe.speculative.metrics import SpecMetrics
from voicepipe.speculative.sampling import SamplingParams

if TYPE_CHECKING:
    from voicepipe.nn.tts.codec_tts import CodecLMTTS

LmSteps = Generator[Call | np.ndarray, object, None]


def lm_steps(
    tts: CodecLMTTS,
    text: str,
    cfg: TtsConfig,
    stats: dict | None = None,
    durations: list[int] | None = None,
    pace: float = 1.0,
) -> LmSteps:
    """Yield ``Draft`` / ``Verify`` calls (send back their result) and (N, Q) code blocks
    (send None) for ``text``: speculative, or plain per rule "ar". A text whose plan
    exceeds ``max_frames`` is spoken as several passes (``CodecLMTTS.plans``), whose
    blocks follow each other as one utterance."""
    total, rule = SpecMetrics(), tts.rule(cfg)
    k = max(1, cfg.spec_k)
    sampling = SamplingParams(temperature=cfg.temperature, seed=cfg.seed)
    for _piece, ids, al in tts.plans(text, durations, pace):
        target = CodecLMTarget(tts.m.target, conditioning(tts.m.target, ids, al), seed=cfg.seed)
        proposer = None
        if cfg.rule != "ar" and cfg.spec_k > 0:
            proposer = CodecLMProposer(
                tts.m.draft,
                conditioning(tts.m.draft, ids, al),
                temperature=cfg.temperature,
                seed=cfg.seed,
            )
        decoder = SpeculativeDecoder(
            target,
            proposer,
            sampling,
            k=k,
            rule=rule,
            controller=lambda: AdaptiveK.for_codec(k, adaptive=cfg.adaptive_k),
        )
        decoder.defer_proposals = True
        steps = decoder.steps([target.bos], al.n_frames)
        reply: object = None
        while True:
            try:
                item = steps.send(reply)  # type: ignore[arg-type]
            except StopIteration:
                break
            if isinstance(item, PrefillCall):  # no pass: the cache starts empty
                target.prefill(item.tokens)
                reply = None
            elif isinstance(item, ProposeCall):
                assert proposer is not None
                reply = yield Draft(proposer, item.context, item.k)
            elif isinstance(item, ScoreCall):
                reply = yield Verify(target, item.tokens)
            else:
                assert isinstance(item, list)  # (no forcer here: a ForceCall never comes)
                reply = None
                yield target.levels(item)
        total.merge(decoder.metrics)
    if stats is not None:
        stats.update(codec_stats(total))


def code_blocks(steps: LmSteps):
    """The code blocks of ``lm_steps``, its calls run one at a time (no batching)."""
    reply: object = None
    while True:
        try:
            item = steps.send(reply)
        except StopIteration:
            return
        if isinstance(item, np.ndarray):
            reply = None
            yield item
        else:
            reply = run_alone(item)


def pieces(n: int) -> list[int]:
    """n as a sum of decreasing powers of two (13 → 8, 4, 1)."""
    return [1 << b for b in range(n.bit_length() - 1, -1, -1) if n >> b & 1]


class Synthesis:
    """One text being spoken: its LM steps, the codes not yet vocoded, its stream decoder.

    A driver alternates ``advance`` (send the result of ``call``, run to the next call,
    keeping the code blocks on the way) while ``wants_frames``, and ``push`` (one vocoder
    call, its audio) while ``can_push``; ``done`` after the stream's flush."""

    def __init__(
        self,
        tts: CodecLMTTS,
        text: str,
        cfg: TtsConfig,
        stats: dict | None = None,
        durations: list[int] | None = None,
        pace: float = 1.0,
    ) -> None:
        self.first_frames, self.chunk_frames = tts.first_frames, tts.chunk_frames
        self.threads, self.lm_threads = tts.threads, tts.lm_threads  # the vocoder's, the LM's
        self.q = tts.codec.q
        self.steps = lm_steps(tts, text, cfg, stats, durations, pace)
        self.dec = tts.codec.stream_decoder()
        self.pending: list[np.ndarray] = []
        self.n_pending = 0
        self.first = True
        self.call: Call | None = None
        self.started = False  # the LM ran to its first call
        self.lm_done = False
        self.done = False

    @property
    def need(self) -> int:
        """Codec frames the next vocoder push takes."""
        return self.first_frames if self.first else self.chunk_frames

    def wants_frames(self) -> bool:
        return not self.lm_done and self.n_pending < self.need

    def can_push(self) -> bool:
        return not self.done and (self.n_pending >= self.need or self.lm_done)

    def advance(self, reply: object = None) -> None:
        """Send ``reply`` (the result of ``call``; None to start) and run to the next call."""
        self.started = True
        self.call = None
        try:
            item = self.steps.send(reply)
            while isinstance(item, np.ndarray):
                self.pending.append(item)
                self.n_pending += len(item)
                item = self.steps.send(None)
        except StopIteration:
            self.lm_done = True
            return
        self.call = item

    def run_lm(self) -> None:
        """Advance alone until the next push has its frames (or the LM is done)."""
        if not self.started:
            self.advance()
        while self.wants_frames():
            assert self.call is not None
            self.advance(run_alone(self.call))

    def push(self) -> list[np.ndarray]:
        """The next vocoder call's audio: ``need`` frames, or once the LM is done the rest
        in power-of-two pieces and the stream's tail (then ``done``)."""
        if self.n_pending >= self.need:
            codes = np.concatenate(self.pending)
            # Exactly ``need`` frames per push: the vocoder then sees a few fixed input
            # widths, and oneDNN's cached conv primitives are reused.
            wave = self.dec.push(codes[: self.need, : self.q])
            rest = codes[self.need :]
            self.pending, self.n_pending = ([rest] if len(rest) else []), len(rest)
            self.first = False
            return [wave.numpy()] if len(wave) else []
        assert self.lm_done
        out = []
        if self.n_pending:  # the tail in power-of-two pieces, for the same reason
            codes = np.concatenate(self.pending)
            for size in pieces(len(codes)):
                wave = self.dec.push(codes[:size, : self.q])
                codes = codes[size:]
                if len(wave):
                    out.append(wave.numpy())
            self.pending, self.n_pending = [], 0
        tail = self.dec.flush()
        if len(tail):
            out.append(tail.numpy())
        self.done = True
        return out

    def close(self) -> None:
        self.steps.close()


def codec_stats(m: SpecMetrics) -> dict:
    """The speculation counters of one utterance, in the TTS's own terms (a token is a
    frame; every drafted code is one step of the draft model)."""
    d = m.as_dict()
    return {
        **d,
        "frames": m.tokens,
        "draft_steps": m.drafted,
        "acceptance_per_position": d["accept_by_pos"],
    }
