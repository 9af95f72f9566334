"""One monotonic nanosecond clock for the whole process.

Every frame's ``t_ns`` and every span's bounds come from here, so spans from
different stages can be subtracted from each other. Sans-I/O code in
``voicepipe.core`` never calls this: it takes ``now_ns`` as an argument.
"""

from __future__ import annotations

import time


def now_ns() -> int:
    return time.monotonic_ns()


def ns_to_ms(ns: int | float) -> float:
    return ns / 1e6
