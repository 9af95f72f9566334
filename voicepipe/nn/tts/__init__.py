"""The audio-token TTS: the MelVQ codec, the codec LM (decode, batched passes, synthesis as
a state machine), phoneme durations and alignment, the hibari teacher, EnCodec backend.
"""
