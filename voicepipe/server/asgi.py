"""The server's ASGI application (Starlette): every endpoint on one port.

    /ws                    WebSocket, protocol v1 (docs/PROTOCOL.md) → server.serve_connection
    /v1/realtime           WebSocket, the OpenAI Realtime API (docs/REALTIME.md, server/realtime.py)
    /healthz, /readyz      liveness (the process answers: 200), readiness (a session can
                           start now: 200; else 503 with a JSON reason: loading, draining, full)
    /metrics               Prometheus text
    /v1/models, /v1/chat/completions    OpenAI-compatible (server/openai_api.py)
    /…                     the browser page's static files (web/)

``HostGuard`` runs before any route: a request from a browser page not among the
server's own origins (a WebSocket upgrade, a POST) gets 403, a plain HTTP request
naming a foreign ``Host`` gets 403, and two Host or Origin headers get 400 (server/hosts.py
says whose names count: DNS rebinding). ``NotLoaded`` runs next: until the models are in
memory, a session endpoint (WebSocket, /v1) gets 503 with ``Retry-After``, never a
404 or a hang. The app is plain ASGI, so any ASGI
server can run it (``voicepipe serve`` runs it on uvicorn, server/app.py).
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from voicepipe.core.wire import protocol as P
from voicepipe.server import openai_api, static
from voicepipe.server.metrics import CONTENT_TYPE
from voicepipe.server.realtime import PATH as REALTIME_PATH
from voicepipe.server.realtime import RealtimeConnection
from voicepipe.server.transport import AsgiWebSocket, TransportClosed

if TYPE_CHECKING:
    from voicepipe.server.app import Server

log = logging.getLogger(__name__)
# What a client is told to wait before it tries again while the models load (HTTP
# Retry-After, whole seconds): loading takes seconds to a minute, a retry costs next to nothing.
RETRY_AFTER_S = 1


def _header_values(scope: Scope, name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == name]


async def _refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    text: str,
    content_type: str = "text/plain; charset=utf-8",
    headers: dict[str, str] | None = None,
) -> None:
    if scope["type"] == "http":
        reply = static.response(status, text.encode(), content_type, headers)
        await reply(scope, receive, send)
        return
    if "websocket.http.response" in scope.get("extensions", {}):  # ASGI's denial response
        raw = [(b"content-type", content_type.encode())]
        raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
        await send({"type": "websocket.http.response.start", "status": status, "headers": raw})
        await send({"type": "websocket.http.response.body", "body": text.encode()})
    else:  # the server answers a close before accept with 403
        await send({"type": "websocket.close", "code": P.CLOSE_BAD_ORIGIN})


def not_ready_body(reason: str) -> str:
    """The JSON of a 503 from /readyz or a session endpoint: ``{"ready": false, "reason"}``."""
    return json.dumps({"ready": False, "reason": reason}) + "\n"


class NotLoaded:
    """Until the models are loaded, a session endpoint (the WebSockets, /v1) answers 503
    with Retry-After and ``{"ready": false, "reason": "loading"}``: a client or a load
    balancer retries, where a 404 or a refused connection reads as a broken server. Health,
    metrics and the page's files are served meanwhile."""

    def __init__(self, app: ASGIApp, server: Server) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.server.loaded or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket" or scope["path"].startswith("/v1/"):
            retry = {"Retry-After": str(RETRY_AFTER_S)}
            body = not_ready_body("loading")
            await _refuse(scope, receive, send, 503, body, "application/json", retry)
            return
        await self.app(scope, receive, send)


def _bearer_ok(scope: Scope, token: str) -> bool:
    values = _header_values(scope, b"authorization")
    return len(values) == 1 and hmac.compare_digest(values[0].strip(), f"Bearer {token}")


class HostGuard:
    """The Origin and Host checks, before routing (see the module docstring)."""

    def __init__(self, app: ASGIApp, server: Server) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        hosts, origins = _header_values(scope, b"host"), _header_values(scope, b"origin")
        if len(hosts) > 1 or len(origins) > 1:
            await _refuse(scope, receive, send, 400, "more than one Host or Origin header\n")
            return
        host = hosts[0] if hosts else None
        origin = origins[0] if origins else None
        # A page elsewhere may not open sessions, nor POST here (its browser sends its Origin;
        # it could not read the answer, but it could keep the model busy). GETs are not
        # judged by Origin: the page's own module scripts carry one.
        judged = scope["type"] == "websocket" or scope["method"] not in ("GET", "HEAD")
        if judged and not self.server.origin_allowed(origin):
            log.warning("refused origin %r (host %r)", origin, host)
            text = f"{P.CLOSE_REASONS[P.CLOSE_BAD_ORIGIN]}\n"
            await _refuse(scope, receive, send, 403, text)
            return
        token = self.server.cfg.server.auth_token
        if scope["type"] == "websocket" and scope["path"] == REALTIME_PATH and token:
            # The Realtime API's clients authenticate with a header (``Authorization: Bearer
            # <key>``), not in a first message: refused before the upgrade, as an Origin is.
            if not _bearer_ok(scope, token):
                log.warning("refused %s: missing or wrong bearer token", REALTIME_PATH)
                await _refuse(scope, receive, send, 403, f"{P.CLOSE_REASONS[P.CLOSE_BAD_AUTH]}\n")
                return
        if scope["type"] == "http" and not self.server.host_allowed(host):
            log.warning("refused HTTP request for host %r", host)
            await _refuse(scope, receive, send, 403, "unknown host\n")
            return
        await self.app(scope, receive, send)


def build(server: Server) -> Starlette:
    """The ASGI app serving ``server``'s sessions, page, health and OpenAI endpoints."""

    async def ws_endpoint(websocket: WebSocket) -> None:
        transport = AsgiWebSocket(websocket)
        try:
            await transport.accept()
        except TransportClosed:
            return
        await server.serve_connection(transport)

    async def realtime_endpoint(websocket: WebSocket) -> None:
        transport = AsgiWebSocket(websocket)
        try:
            await transport.accept()
        except TransportClosed:
            return
        await server.serve_connection(transport, RealtimeConnection)

    async def healthz(request: Request) -> Response:
        body = {
            "sessions": server.admission.sessions,
            "pending": server.admission.pending,
            "pipeline": server.pipeline_name,
        }
        if server.session_prefix:  # a Ray Serve replica: which one answered
            body["replica"] = server.session_prefix.rstrip("-")
        return static.response(200, json.dumps(body).encode(), "application/json")

    async def readyz(request: Request) -> Response:
        reason = server.readiness()
        if reason is None:
            body = {"ready": True, "sessions": server.admission.sessions}
            return static.response(200, json.dumps(body).encode(), "application/json")
        retry = {"Retry-After": str(RETRY_AFTER_S)}
        return static.response(503, not_ready_body(reason).encode(), "application/json", retry)

    async def metrics(request: Request) -> Response:
        return static.response(200, server.metrics.render(), CONTENT_TYPE)

    async def files(request: Request) -> Response:
        return static.static_file(server.web_root, request.scope["path"])

    routes: list[Any] = [
        WebSocketRoute(static.WS_PATH, ws_endpoint),
        WebSocketRoute(REALTIME_PATH, realtime_endpoint),
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/readyz", readyz, methods=["GET", "HEAD"]),
        Route("/metrics", metrics, methods=["GET", "HEAD"]),
        *openai_api.routes(server.openai),
        Route("/{path:path}", files, methods=["GET", "HEAD"]),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(NotLoaded, server=server)
    app.add_middleware(HostGuard, server=server)  # added last: runs first
    return app
