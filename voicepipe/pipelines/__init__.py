"""Pipelines by name, and the ``SessionInfo`` every pipeline is built for.

A pipeline is a module ``voicepipe/pipelines/<name>.py`` defining::

    def build(cfg: Config, session: SessionInfo) -> list[Stage]: ...
    def preload(cfg: Config) -> None: ...   # optional: load shared models once

``voicepipe serve --pipeline <name>`` builds one per WebSocket session. The
first stage receives, in order: ``AudioIn`` frames (mono float32 at
``session.asr_sample_rate``, ``media_ns`` on the client's input timeline),
``Interrupt`` when the client asks to stop, ``PlaybackReport`` (upstream
information, as a system frame), and finally ``InputEnd`` when the client
has sent everything. Whatever reaches the end of the chain goes to the
client: transcripts, reply text, ``ReplyAudio`` + ``ReplyEnd``, spans,
metrics, errors.

Reply audio is paced by ``voicepipe.stages.output.OutputStage``; when the
list a pipeline returns contains no ``OutputStage``, ``build`` appends one,
so a pipeline may simply end with its TTS.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from types import ModuleType

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.stage import Stage


class PipelineError(ValueError):
    pass


@dataclass(frozen=True)
class SessionInfo:
    """What a pipeline needs to know about the session it serves."""

    session_id: str
    input_sample_rate: int  # the client's capture rate (hello.sample_rate)
    asr_sample_rate: int  # rate of the AudioIn frames the first stage receives
    output_sample_rate: int  # the rate reply audio is sent at (OutputStage resamples to it)
    frame_ms: int = 20  # wire frame length of reply audio
    client: str = ""  # free text from the hello
    pipeline: str = ""
    start_ns: int = field(default_factory=now_ns)  # session start on the shared clock

    @classmethod
    def for_config(
        cls,
        cfg: Config,
        session_id: str = "local",
        input_sample_rate: int = 0,
        output_sample_rate: int = 0,
        pipeline: str = "",
    ) -> SessionInfo:
        """Convenience for tests and offline runs."""
        return cls(
            session_id=session_id,
            input_sample_rate=input_sample_rate or cfg.audio.asr_sample_rate,
            asr_sample_rate=cfg.audio.asr_sample_rate,
            output_sample_rate=output_sample_rate or cfg.audio.output_sample_rate,
            frame_ms=cfg.audio.frame_ms,
            pipeline=pipeline,
        )


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load(name: str) -> ModuleType:
    if name not in available():
        raise PipelineError(f"unknown pipeline {name!r} (available: {', '.join(available())})")
    mod = importlib.import_module(f"{__name__}.{name}")
    if not callable(getattr(mod, "build", None)):
        raise PipelineError(f"voicepipe/pipelines/{name}.py defines no build(cfg, session)")
    return mod


def preload(name: str, cfg: Config) -> None:
    """Load a pipeline's models once per process, before the first session.

    A pipeline module may define ``preload(cfg)``; without it the first
    session would pay for loading the models inside its first turn.
    """
    fn = getattr(load(name), "preload", None)
    if callable(fn):
        fn(cfg)


def build(name: str, cfg: Config, session: SessionInfo) -> list[Stage]:
    from voicepipe.stages.output import OutputStage

    stages = list(load(name).build(cfg, session))
    if not any(isinstance(s, OutputStage) for s in stages):
        stages.append(OutputStage(cfg, session))
    return stages
