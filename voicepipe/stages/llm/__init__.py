"""The LLM stage: TranscriptFinal → streamed TextDelta and speakable TextChunk frames.

stage (the Stage, holding the rest), context (the conversation), reply (one reply's frames),
preempt (tentative replies), tools (tool round trips), local and remote (token sources),
engine (shared weights, a per-session fork).
"""
