"""Thin async shells, one per pipeline stage: asr, turns (barge-in), llm/ (a folder),
tts and output (pacing). Decisions live in core/, models in nn/, shared per-process
schedulers in voicepipe.schedulers.
"""
