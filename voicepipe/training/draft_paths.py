"""Where ``train draft`` keeps its data and runs (under the models home unless given):
apart from draft.py, so its steps (draft_fit, draft_replies) need not import it back.
"""

from __future__ import annotations

from pathlib import Path


def data_dir(arg: str = "") -> Path:
    from voicepipe import registry

    return Path(arg) if arg else registry.home() / "data" / "draft"


def run_dir(arg: str = "") -> Path:
    from voicepipe import registry

    return Path(arg) if arg else registry.home() / "runs" / "draft"
