"""HTTP side of the server: static files of web/ and the Origin check, on the /ws port.

``websockets`` calls ``process_request`` for every HTTP request before the
WebSocket handshake; returning a ``Response`` answers it as plain HTTP.
"""

from __future__ import annotations

import email.utils
import http
import mimetypes
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

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


def web_root(configured: str) -> Path:
    return Path(configured).expanduser().resolve() if configured else DEFAULT_WEB_ROOT


def response(
    status: int, body: bytes, content_type: str, extra: Sequence[tuple[str, str]] = ()
) -> Response:
    s = http.HTTPStatus(status)
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Content-Length", str(len(body))),
            ("Content-Type", content_type),
            ("Cache-Control", "no-cache"),
            *extra,
        ]
    )
    return Response(s.value, s.phrase, headers, body)


def text_response(status: int, text: str) -> Response:
    return response(status, text.encode(), "text/plain; charset=utf-8")


def static_file(root: Path, request_path: str) -> Response:
    """A file under ``root`` (``/`` → index.html), or 404; never anything outside root."""
    path = unquote(urlsplit(request_path).path)
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
    # Cross-origin isolation lets the page use SharedArrayBuffer between AudioWorklets.
    isolation = [
        ("Cross-Origin-Opener-Policy", "same-origin"),
        ("Cross-Origin-Embedder-Policy", "require-corp"),
    ]
    return response(200, target.read_bytes(), ctype or "application/octet-stream", isolation)


def is_ws_request(request: Request) -> bool:
    return urlsplit(request.path).path == WS_PATH
