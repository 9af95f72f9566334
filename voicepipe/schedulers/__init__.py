"""Process-wide schedulers every session shares: the LLM batch (llm_batch), the TTS batch
(tts_batch), one Whisper decode at a time (asr_gate), and batch-worker jobs (jobs).
"""
