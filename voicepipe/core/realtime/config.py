"""A ``session.update`` applied to the effective session, sans-I/O: what voicepipe honours,
what it refuses (with the API's error), and the server_vad defaults. ``semantic_vad`` maps
onto voicepipe's semantic end of turn: its ``eagerness`` is ``[turns] eagerness``.
"""

from __future__ import annotations

from dataclasses import replace

from voicepipe.core.realtime import server_events as S
from voicepipe.core.realtime.events import (
    FORMAT_PCM,
    SAMPLE_RATE,
    RealtimeError,
    SessionPatch,
    TurnDetection,
)

# voicepipe's own endpointing defaults ([vad] threshold, end_silence_ms) and the ASR's
# fixed 300 ms pre-roll, which is also the API's default prefix padding.
DEFAULT_VAD = TurnDetection(
    type="server_vad",
    threshold=0.5,
    prefix_padding_ms=300,
    silence_duration_ms=400,
    idle_timeout_ms=None,
    create_response=True,
    interrupt_response=True,
)


def apply_patch(c: S.SessionConfig, p: SessionPatch, *, audio_sent: bool) -> S.SessionConfig:
    """The session after ``p``; raises ``RealtimeError`` (and changes nothing) if refused."""
    if p.type != "realtime":
        raise RealtimeError(
            "invalid_value",
            "Only realtime sessions are supported (not transcription sessions).",
            param="session.type",
        )
    for fmt, where in ((p.input_format, "input"), (p.output_format, "output")):
        if fmt is not None and (fmt.type != FORMAT_PCM or fmt.rate != SAMPLE_RATE):
            raise RealtimeError(
                "invalid_value",
                f"Unsupported {where} audio format {fmt.type} "
                f"{fmt.rate or ''}: only audio/pcm (PCM16) at 24000 Hz is supported.",
                param=f"session.audio.{where}.format",
            )
    if p.output_modalities is not None and len(set(p.output_modalities)) != 1:
        raise RealtimeError(
            "invalid_value",
            "output_modalities is either ['audio'] or ['text'].",
            param="session.output_modalities",
        )
    if p.voice is not None and p.voice != c.voice and audio_sent:
        raise RealtimeError(
            "cannot_update_voice",
            "Cannot update a conversation's voice if assistant audio is present.",
            param="session.audio.output.voice",
        )
    td = (
        resolve_vad(p.turn_detection, c.turn_detection)
        if p.turn_detection_set
        else c.turn_detection
    )
    return replace(
        c,
        instructions=p.instructions if p.instructions is not None else c.instructions,
        voice=p.voice if p.voice is not None else c.voice,
        speed=p.speed if p.speed is not None else c.speed,
        turn_detection=td,
        transcription=p.transcription if p.transcription_set else c.transcription,
        tools=p.tools if p.tools is not None else c.tools,
        tool_choice=p.tool_choice if p.tool_choice is not None else c.tool_choice,
        output_modalities=(
            tuple(dict.fromkeys(p.output_modalities))
            if p.output_modalities
            else c.output_modalities
        ),
        max_output_tokens=p.max_output_tokens
        if p.max_output_tokens is not None
        else c.max_output_tokens,
    )


def resolve_vad(new: TurnDetection | None, old: TurnDetection | None) -> TurnDetection | None:
    """server_vad knobs as sent, the unsent ones kept from before (or the defaults)."""
    if new is None:
        return None
    if new.type == "semantic_vad":
        # The LLM's P(end of turn) sets the pause (core/turns/semantic.py, [turns]
        # eagerness); threshold and prefix padding stay voicepipe's, silence_duration_ms
        # is the wait while no estimate is known.
        base = old or DEFAULT_VAD
        return TurnDetection(
            type="semantic_vad",
            eagerness=new.eagerness or "auto",
            create_response=new.create_response
            if new.create_response is not None
            else base.create_response,
            interrupt_response=new.interrupt_response
            if new.interrupt_response is not None
            else base.interrupt_response,
        )
    if new.type != "server_vad":
        raise RealtimeError(
            "invalid_value",
            "Only server_vad or semantic_vad turn detection is supported "
            "(or null for manual commits).",
            param="session.audio.input.turn_detection.type",
        )
    base = old or DEFAULT_VAD
    if base.type != "server_vad":  # from semantic_vad: its switches, server_vad's knobs
        base = replace(
            DEFAULT_VAD,
            create_response=base.create_response,
            interrupt_response=base.interrupt_response,
        )
    return TurnDetection(
        type="server_vad",
        threshold=new.threshold if new.threshold is not None else base.threshold,
        prefix_padding_ms=new.prefix_padding_ms
        if new.prefix_padding_ms is not None
        else base.prefix_padding_ms,
        silence_duration_ms=new.silence_duration_ms
        if new.silence_duration_ms is not None
        else base.silence_duration_ms,
        idle_timeout_ms=new.idle_timeout_ms,
        create_response=new.create_response
        if new.create_response is not None
        else base.create_response,
        interrupt_response=new.interrupt_response
        if new.interrupt_response is not None
        else base.interrupt_response,
    )
