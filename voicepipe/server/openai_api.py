"""OpenAI-compatible HTTP endpoints (filled in below)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from voicepipe.server.app import Server


def routes(server: Server) -> list[Any]:
    return []
