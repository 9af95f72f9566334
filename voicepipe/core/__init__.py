"""Decisions without I/O: pure, strictly typed, numpy and the standard library only.

By topic: realtime/ (OpenAI Realtime events and session), text/ (the TTS text front-end,
clause chunker, WER), playout/ (jitter buffer), turns/ (endpointing, barge-in, preemption),
wire/ (the /ws protocol, admission, chat completions); the batch and tool policies here.
"""
