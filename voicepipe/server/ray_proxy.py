"""What carries connections to voicepipe's Ray Serve replicas: Serve's switches for
``ray.ingress`` (``serve_env``), and what Serve's Python proxy adds: a WebSocket whose
replica died gets a close with a reason (1012 ``replica lost: reconnect``) instead of a
dropped connection, and a request that comes before the application has a route (the
proxy listens at once, the application is deployed after) gets 503 with Retry-After
instead of the proxy's 404.

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

from voicepipe.config import ConfigError, RayConfig
from voicepipe.core.wire import protocol as P

CALLBACK_ENV = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
CALLBACK = "voicepipe.server.ray_proxy.middlewares"
METRICS_PUSH_S = 0.5
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


# The proxy's own answer for a path no application serves (yet): "Path '/ws' not found. ..."
_NO_ROUTE_PREFIX = b"Path '"
RETRY_AFTER_S = 1
STARTING_BODY = b'{"ready": false, "reason": "starting"}\n'
LIVE_BODY = b'{"sessions": 0, "pending": 0, "starting": true}\n'  # /healthz: the proxy is up


class NotDeployedYet:
    """The proxy's 404 for a path with no application is, for voicepipe (whose one
    application serves every path at "/"), "not deployed yet": 503 with Retry-After and
    ``{"ready": false, "reason": "starting"}``, for a WebSocket as the answer to its
    upgrade; /healthz says 200 (the process answers: a liveness probe must not restart a
    server that is starting). A 404 of the application itself (a missing file) passes
    unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        held: Message | None = None  # a 404's start, until its body says whose it is
        replaced = False

        async def send_checked(message: Message) -> None:
            nonlocal held, replaced
            kind = message["type"]
            if replaced:
                return
            if kind.endswith("response.start") and message.get("status") == 404:
                held = message
                return
            if held is not None and kind.endswith("response.body"):
                start, held = held, None
                if message.get("body", b"").startswith(_NO_ROUTE_PREFIX):
                    replaced = True
                    await _starting(scope, send)
                    return
                await send(start)
            await send(message)

        await self.app(scope, receive, send_checked)


async def _starting(scope: Scope, send: Send) -> None:
    headers = [(b"content-type", b"application/json"), (b"retry-after", b"%d" % RETRY_AFTER_S)]
    if scope["type"] == "http" and scope["path"] == "/healthz":
        json_type = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": json_type})
        await send({"type": "http.response.body", "body": LIVE_BODY})
    elif scope["type"] == "http":
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": STARTING_BODY})
    elif "websocket.http.response" in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": 503, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": STARTING_BODY})
    else:  # no denial response: a close before accept (the server sends 403)
        await send({"type": "websocket.close", "code": P.CLOSE_GOING_AWAY})


def serve_env(c: RayConfig) -> dict[str, str]:
    """Serve's switches for ``ray.ingress``, read by every Serve process (driver,
    controller, proxy, replicas) when it imports Serve.

    haproxy: Serve's HAProxy ingress: each replica serves the ASGI app on a port of its own
    and HAProxy (bundled with ray[serve]) balances connections over them by least
    connections; an open WebSocket is then a TCP tunnel, not a relay.
    proxy: Serve's Python proxy, with voicepipe's middleware (below: 1012 for a dead replica's
    sessions) and without its preference for the replicas on its own node
    (which piles every session of a HeadOnly proxy onto the head's replicas until they are
    full while the other nodes' CPUs idle)."""
    # The autoscaler's inputs, pushed every METRICS_PUSH_S instead of Serve's 10 s: a step
    # of conversations is seen within a second or two (ray_serve.application's look-back).
    push = {
        "RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S": str(METRICS_PUSH_S),
        "RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S": str(METRICS_PUSH_S),
        # The app on the replica's own event loop, not on a loop in a thread of its own:
        # with the thread, every ASGI message crosses threads in batches, which cost
        # 150-400 ms of voice-to-voice (docs/BENCHMARKS.md). The server keeps its loop
        # free of long work (models run in threads), as it does under plain uvicorn.
        "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
        # A proxy (HAProxy's manager too) that is not ready within 5 s, or misses health
        # checks of 10 s, is killed and started again, and serve.start fails: on a busy
        # box, starting HAProxy takes longer. Patience instead.
        "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60",
        "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "30",
    }
    if c.ingress == "haproxy":
        return {"RAY_SERVE_ENABLE_HA_PROXY": "1", **push}
    if c.ingress == "proxy":
        return {
            CALLBACK_ENV: CALLBACK,
            "RAY_SERVE_PROXY_PREFER_LOCAL_NODE_ROUTING": "0",
            "RAY_SERVE_PROXY_PREFER_LOCAL_AZ_ROUTING": "0",
            **push,
        }
    raise ConfigError(f"ray.ingress: expected haproxy or proxy, got {c.ingress!r}")


def middlewares() -> list[Any]:
    """Serve's proxy callback: the middleware list it wraps its ASGI app with."""
    return [Middleware(NotDeployedYet), Middleware(ReplicaLostClose)]
