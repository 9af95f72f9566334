"""How the stages' model calls share the cores: nn/threads.py's process-wide budget, set
once from ``[server] adaptive_threads`` by whoever runs the sessions (server/app.py), so
the server reaches the models only through stages/; and how often Python's threads trade
the GIL (``[server] gil_switch_ms``). Not a stage."""

from __future__ import annotations

import sys

from voicepipe.config import Config


def configure(cfg: Config) -> None:
    from voicepipe.nn.threads import BUDGET

    BUDGET.adaptive = cfg.server.adaptive_threads
    # A model pass releases the GIL while it computes, then needs it back to read its
    # result and start the next step; with the event loop and the TTS's Python busy on
    # other threads it waits up to the switch interval (5 ms by default) each time.
    # Measured: a 1.5B decode step beside a thread busy with Python 7.5 % of the time
    # took 75-84 ms at 5 ms, 67-73 ms at 0.5 ms, 66-79 ms alone (docs/benchmarks/e2e.md).
    if cfg.server.gil_switch_ms > 0:
        sys.setswitchinterval(cfg.server.gil_switch_ms / 1000)
