"""HTTP side of the server: static files of web/ (the browser page), no path traversal."""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from pathlib import Path

from starlette.responses import Response

WS_PATH = "/ws"
DEFAULT_WEB_ROOT = Path(__file__).resolve().parent.parent.parent / "web"
_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".svg": "image/svg+xml",
}
# Cross-origin isolation lets the page use SharedArrayBuffer between AudioWorklets.
_ISOLATION = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
}


def web_root(configured: str) -> Path:
    return Path(configured).expanduser().resolve() if configured else DEFAULT_WEB_ROOT


def response(
    status: int, body: bytes, content_type: str, extra: Mapping[str, str] | None = None
) -> Response:
    headers = {"Cache-Control": "no-cache", **(extra or {})}
    return Response(body, status, headers=headers, media_type=content_type)


def text_response(status: int, text: str) -> Response:
    return response(status, text.encode(), "text/plain; charset=utf-8")


def static_file(root: Path, path: str) -> Response:
    """A file under ``root`` (``/`` → index.html), or 404; never anything outside root.

    ``path`` is the request's decoded path (ASGI's ``scope["path"]``): ``%2e%2e`` is
    ``..`` by now, and resolving it below decides."""
    rel = path.lstrip("/") or "index.html"
    try:
        target = (root / rel).resolve()
        target.relative_to(root.resolve())
    except (ValueError, OSError):
        return text_response(404, "not found\n")
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        return text_response(404, "not found\n")
    ctype = _TYPES.get(target.suffix) or mimetypes.guess_type(target.name)[0]
    return response(200, target.read_bytes(), ctype or "application/octet-stream", _ISOLATION)
