"""The LLM stage: TranscriptFinal → streamed TextDelta and speakable TextChunk frames.

stage (the Stage), context (endpoint-controlled conversation), engine (weights and fork),
preempt (replies, preemptive generation), tools (tool round trips), remote (OpenAI backend).
"""
