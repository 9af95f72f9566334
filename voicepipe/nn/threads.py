"""Intra-op threads of a model call, by how many model calls the process runs at once.

Two cores serve every session's ASR, LLM and vocoder. A call that runs alone may
use both (a prompt pass, a vocoder push: compute-bound, they nearly halve); when
others are in flight the cores are already taken by them, and a second OpenMP
thread only adds a team to wake at each of the call's parallel regions (under
``OMP_WAIT_POLICY=PASSIVE`` a futex wake per region, and a wait for a core the
other calls hold): measured at 4 concurrent sessions, the vocoder's calling
threads spent more samples waiting in libgomp than computing (docs/BENCHMARKS.md,
"Many sessions on one box"). So each call claims its threads here: what it wants
when it is the only call in flight, one otherwise.

Before this, each call set its own count regardless (the LLM's prefill even set the
shared kernel's count for every session's passes in that window).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ThreadBudget:
    """Counts model calls in flight and hands each its thread count."""

    def __init__(self, cores: int | None = None) -> None:
        self.cores = cores or os.cpu_count() or 1
        self._lock = threading.Lock()
        self.adaptive = True  # False: every call gets what it wants (server.adaptive_threads)
        self.active = 0
        self.sessions = 0  # sessions busy with a reply (busy())
        self.peak = 0  # the most calls at once (tests, metrics)

    def start_session(self) -> None:
        """A session starts generating or speaking a reply (``end_session`` when done)."""
        with self._lock:
            self.sessions += 1

    def end_session(self) -> None:
        with self._lock:
            self.sessions -= 1

    @contextmanager
    def busy(self) -> Iterator[None]:
        """A session generating or speaking a reply, for as long as the block runs."""
        self.start_session()
        try:
            yield
        finally:
            self.end_session()

    @contextmanager
    def claim(self, want: int = 1, every_session: bool = False) -> Iterator[int]:
        """``with budget.claim(2) as n:`` run the call on ``n`` threads (≥ 1).
        ``every_session``: the call is every busy session's work at once (a batched LLM
        pass), so only other calls in flight count against it."""
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            quiet = every_session or self.sessions <= 1
            alone = not self.adaptive or (self.active == 1 and quiet)
            n = max(1, min(want, self.cores)) if alone else 1
        try:
            yield n
        finally:
            with self._lock:
                self.active -= 1


BUDGET = ThreadBudget()
