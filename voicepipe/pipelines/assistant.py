"""`voicepipe serve` (default): the whole assistant on the built-in default models.

    AudioIn ─► EchoCancel (the assistant's own voice out of the mic: speexdsp, fed
                           what the client played; audio.echo_cancel)
            ─► AsrStage (VAD, endpointing, partials, final)
            ─► BargeIn (speech start → Interrupt of older turns; during a reply, pause
                        it and judge by its words: a backchannel or echo resumes it)
            ─► LlmStage (speculative decoding, clause chunker)
            ─► TTSStage (codec LM + β-tolerance speculative decoding → HiFi-GAN)
            ─► OutputStage (20 ms frames paced at real time) ─► client

Preemptive generation (``turns.preempt``): once the user has been quiet for
``turns.preempt_after_ms`` the ASR sends the transcript so far
(``TranscriptStable``); the LLM starts a tentative reply on it and holds its
output until the final transcript agrees (commit) or not (cancel), so the
reply is ready when the endpointer fires. Every span of docs/DESIGN.md §9 is
emitted along the way (LLM spans say ``preempt=off|kept|cancelled``); the
client (or the server, from playback reports) closes ``e2e.voice_to_voice``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from voicepipe.config import Config
from voicepipe.pipelines import PipelineError, SessionInfo
from voicepipe.stage import Stage, TurnCounter


def build(cfg: Config, session: SessionInfo) -> list[Stage]:
    from voicepipe.stages.asr import AsrStage
    from voicepipe.stages.echo import EchoCancel, Speaker
    from voicepipe.stages.llm.stage import LlmStage
    from voicepipe.stages.output import OutputStage
    from voicepipe.stages.tts import TTSStage
    from voicepipe.stages.turns import BargeIn, EndOfTurnBoard

    turns = TurnCounter()  # the user's turns and the assistant's alerts (timers) alike
    eot = EndOfTurnBoard()  # the LLM's P(end of turn) for the ASR's endpointer
    # What the client's speaker played, when: the output stage records it, the echo
    # canceller and the barge-in judge read it (core/playout/speaker.py).
    speaker = Speaker(cfg.audio.asr_sample_rate)
    return [
        EchoCancel(cfg, speaker),
        AsrStage(cfg, turns=turns, eot=eot),
        BargeIn(cfg.turns, speaker, eot=eot),
        LlmStage(cfg, turns=turns, eot=eot),
        TTSStage(cfg),
        OutputStage(cfg, session, speaker=speaker),
    ]


def preload(cfg: Config) -> None:
    """Load ASR, LLM and TTS weights once, so the first turn pays no loading time.

    The codec-LM TTS weights (LM, draft, durations, codebooks, vocoder) load into
    the process-wide share every session's TTS stage uses, and the warm-up runs
    the vocoder's streaming shapes once for the whole process. The LLM's packed
    weights come from their on-disk cache after the first start (voicepipe/nn/llm/packed.py),
    and its system prompt's keys and values go into the prefix cache, so the first
    session copies them too. Each step says on stderr what it loads and how long it took
    (stdout's first line stays the URL line)."""
    from voicepipe.stages import asr, tts
    from voicepipe.stages.llm.engine import engine_for

    _loading(f"ASR {cfg.asr.model}", lambda: asr.preload(cfg))
    c = cfg.llm
    if c.backend == "local":
        _loading(f"LLM {c.model} ({c.weights}, drafter {c.drafter})", lambda: engine_for(cfg))
    else:
        _loading(f"LLM {c.model} (at {c.base_url})", lambda: check_llm_backend(cfg))
    if cfg.turns.p_end_model:  # the separate P(end of turn) model (stages/llm/p_end.py)
        from voicepipe.stages.llm.p_end import estimator_for

        _loading(f"P(end) {cfg.turns.p_end_model}", lambda: estimator_for(cfg))
    what = f"codec-lm ({cfg.codec.model}, {cfg.codec.vocoder})"
    _loading(f"TTS {what if cfg.tts.backend == 'codec-lm' else cfg.tts.backend}",
             lambda: tts.preload(cfg))  # fmt: skip


def _loading(what: str, load: Callable[[], object]) -> None:
    print(f"voicepipe: loading {what} …", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    load()
    print(f"voicepipe: {what.split(' (')[0]} ready ({time.perf_counter() - t0:.1f} s)",
          file=sys.stderr, flush=True)  # fmt: skip


def check_llm_backend(cfg: Config) -> None:
    """An ``llm.backend`` other than local: its server must answer before we serve."""
    from voicepipe.stages.llm.remote import LlmBackendError, check

    try:
        check(cfg)
    except LlmBackendError as e:
        raise PipelineError(str(e)) from None
