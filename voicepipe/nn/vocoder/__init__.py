"""Mel → waveform: the log-mel front end (mel), HiFi-GAN and its exact streaming runner,
and the project's frame-rate iSTFT vocoder with its streaming runner.
"""
