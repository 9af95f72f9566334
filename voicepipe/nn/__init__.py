"""Models only, by modality: llm/ (GGUF LLM, fused kernel glue, engine, EAGLE draft),
tts/ (MelVQ codec, codec LM, the hibari teacher), vocoder/ (HiFi-GAN, iSTFT), asr/
(Whisper, VAD); the C++ kernel builder (kernels) and per-call thread budget (threads).
"""
