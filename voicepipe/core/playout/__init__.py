"""Playout of reply audio: the jitter buffer (ported to web/jitter.js), time-scale
modification for concealment and catch-up (tsm), and scripted network faults (faults).
"""
