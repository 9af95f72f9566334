"""Text on its way to speech: normalisation (norm, rules, tables, numwords), splitting a
text too long for one TTS pass (split), the clause chunker, and word error rate (wer).
"""
