"""What carries connections to voicepipe's Ray Serve replicas: Serve's switches for
``ray.ingress`` (``serve_env``), and what Serve's Python proxy adds: a WebSocket whose
replica died gets a close with a reason (1012 ``replica lost: reconnect``) instead of a
dropped connection.

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
    return [Middleware(ReplicaLostClose)]
