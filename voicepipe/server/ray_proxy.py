"""What Ray Serve's HTTP proxy adds for voicepipe: a WebSocket whose replica died gets a
close with a reason (1012 ``replica lost: reconnect``) instead of a dropped connection.

Serve's proxy, when the replica holding a WebSocket dies, ends its side of the ASGI call
without a close message, and the client sees 1006 (no close frame, no reason). Serve loads
proxy middleware from the import path in ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``,
read by the proxy process itself: ``server/ray_serve.py`` sets it in the runtime_env of the
Ray job that starts Serve (docs/DEPLOY.md says what to set when Serve is started elsewhere).
Light on purpose: it runs in the proxy, which loads no models.
"""

from __future__ import annotations

from typing import Any

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voicepipe.core import protocol as P

CALLBACK_ENV = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
CALLBACK = "voicepipe.server.ray_proxy.middlewares"
LOST_REASON = f"{P.CLOSE_REASONS[P.CLOSE_REPLICA_LOST]}: reconnect"


class ReplicaLostClose:
    """A WebSocket the app accepted and then left without a close (and which the client
    did not close): closed here with 1012 and a reason."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        accepted = closed = False

        async def send_watched(message: Message) -> None:
            nonlocal accepted, closed
            if message["type"] == "websocket.accept":
                accepted = True
            elif message["type"] in ("websocket.close", "websocket.http.response.start"):
                closed = True
            await send(message)

        async def receive_watched() -> Message:
            nonlocal closed
            message = await receive()
            if message["type"] == "websocket.disconnect":
                closed = True
            return message

        try:
            await self.app(scope, receive_watched, send_watched)
        finally:
            if accepted and not closed:
                closed = True
                await send(
                    {"type": "websocket.close", "code": P.CLOSE_REPLICA_LOST, "reason": LOST_REASON}
                )


def middlewares() -> list[Any]:
    """Serve's proxy callback: the middleware list it wraps its ASGI app with."""
    return [Middleware(ReplicaLostClose)]
