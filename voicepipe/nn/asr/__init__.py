"""Hearing: Whisper through faster-whisper (whisper) and the streaming Silero VAD (vad)."""
