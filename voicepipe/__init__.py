"""voicepipe: a real-time voice assistant pipeline for laptop-class CPUs."""

__version__ = "0.1.0"
