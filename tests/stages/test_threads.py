"""stages/threads.py: the process-wide settings a server applies once."""

from __future__ import annotations

import sys

from voicepipe import config
from voicepipe.nn.threads import BUDGET
from voicepipe.stages import threads


def test_configure_sets_the_thread_budget_and_the_gil_switch_interval() -> None:
    before = sys.getswitchinterval(), BUDGET.adaptive
    try:
        threads.configure(config.load(None, ["server.gil_switch_ms=0.5"]))
        assert sys.getswitchinterval() == 0.0005 and BUDGET.adaptive
        sys.setswitchinterval(0.005)
        threads.configure(
            config.load(None, ["server.gil_switch_ms=0", "server.adaptive_threads=false"])
        )
        assert sys.getswitchinterval() == 0.005 and not BUDGET.adaptive  # 0: left as it was
    finally:
        sys.setswitchinterval(before[0])
        BUDGET.adaptive = before[1]
