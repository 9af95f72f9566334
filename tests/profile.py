"""The profile tests run the assistant on: configs/fast.toml (the 135M LLM).

Tests check behaviour (streaming, barge-in, memory, caches), not answer quality,
and the 135M decodes ~20x faster than the default 1.5B on these cores, so the
suite stays inside its time budget whatever the built-in default LLM is. The
default model's own checks (its draft's exactness, tool calls) pin it by name.
"""

from __future__ import annotations

from pathlib import Path

from voicepipe import config

FAST_TOML = Path(__file__).resolve().parents[1] / "configs" / "fast.toml"


def fast() -> config.Config:
    return config.load(FAST_TOML)
