"""How the stages' model calls share the cores: nn/threads.py's process-wide budget, set
once from ``[server] adaptive_threads`` by whoever runs the sessions (server/app.py), so
the server reaches the models only through stages/. Not a stage."""

from __future__ import annotations

from voicepipe.config import Config


def configure(cfg: Config) -> None:
    from voicepipe.nn.threads import BUDGET

    BUDGET.adaptive = cfg.server.adaptive_threads
