"""What a session needs of its connection: receive, send, close, abort — nothing more.

``Session`` (server/session.py) speaks to a ``MessageTransport``, never to a
WebSocket library, so every endpoint that carries whole messages (``/ws``
today, ``/v1/realtime`` next) shares one session with its admission,
deadlines, close codes and teardown. ``AsgiWebSocket`` is the one
implementation: an ASGI WebSocket (Starlette's ``WebSocket`` over uvicorn, or
any ASGI server such as Ray Serve's proxy).

Abort: a client that stopped reading never takes the close frame either, so
after a bounded wait the session cuts the TCP connection. ASGI has no message
for that; the uvicorn protocol (server/uvicorn_protocols.py) hands the
transport's ``abort`` in the scope's extensions under ``ABORT_EXTENSION``.
Under another ASGI server it is absent and ``abort`` only stops waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

ABORT_EXTENSION = "voicepipe.abort"


class TransportClosed(Exception):
    """The connection is closed: by the peer, by the WebSocket layer, or by us."""

    def __init__(self, code: int | None = None, reason: str = "") -> None:
        super().__init__(f"closed: {code} {reason}".strip())
        self.code = code
        self.reason = reason


class MessageTransport(Protocol):
    @property
    def remote_address(self) -> str: ...

    @property
    def close_code(self) -> int | None:
        """The code of the closing handshake (the peer's, or the WebSocket layer's own
        1007/1009, or ours), None while open."""

    @property
    def close_reason(self) -> str: ...

    async def recv(self) -> str | bytes:
        """The next whole message; raises TransportClosed once closed."""

    async def send(self, data: str | bytes) -> None:
        """Send one message; waits while the peer's buffers are full (raises
        TransportClosed once closed)."""

    async def close(self, code: int, reason: str) -> None:
        """Start the closing handshake (no-op when already closed)."""

    def abort(self) -> None:
        """Cut the connection now, without a closing handshake."""


class AsgiWebSocket:
    """A ``MessageTransport`` over an ASGI WebSocket connection."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        client = ws.scope.get("client")
        self._address = str(client[0]) if client else "?"
        self._code: int | None = None
        self._reason = ""
        ext = ws.scope.get("extensions") or {}
        self._abort: Callable[[], None] | None = (ext.get(ABORT_EXTENSION) or {}).get("abort")

    @property
    def remote_address(self) -> str:
        return self._address

    @property
    def close_code(self) -> int | None:
        return self._code

    @property
    def close_reason(self) -> str:
        return self._reason

    def _closed(self, code: int | None, reason: str) -> TransportClosed:
        if self._code is None:
            self._code, self._reason = code, reason
        return TransportClosed(self._code, self._reason)

    async def accept(self) -> None:
        try:
            await self.ws.accept()
        except (WebSocketDisconnect, OSError, RuntimeError) as e:  # gone before the upgrade
            raise self._closed(getattr(e, "code", 1006), "") from None

    async def recv(self) -> str | bytes:
        if self._code is not None:
            raise TransportClosed(self._code, self._reason)
        try:
            msg = await self.ws.receive()
        except RuntimeError:  # receive after a disconnect: Starlette's guard
            raise self._closed(1006, "") from None
        if msg["type"] == "websocket.disconnect":
            raise self._closed(msg.get("code", 1005), msg.get("reason") or "")
        text = msg.get("text")
        if text is not None:
            return str(text)
        return bytes(msg.get("bytes") or b"")

    async def send(self, data: str | bytes) -> None:
        if self._code is not None:
            raise TransportClosed(self._code, self._reason)
        msg = {"type": "websocket.send"}
        msg["text" if isinstance(data, str) else "bytes"] = data  # type: ignore[assignment]
        try:
            await self.ws.send(msg)
        except WebSocketDisconnect as e:  # Starlette's wrapping of the server's OSError
            raise self._closed(e.code, e.reason or "") from None
        except (OSError, RuntimeError):
            raise self._closed(1006, "") from None

    async def close(self, code: int, reason: str) -> None:
        if self._code is not None or self.ws.application_state == WebSocketState.DISCONNECTED:
            return
        self._code, self._reason = code, reason
        try:
            await self.ws.close(code, reason)
        except (WebSocketDisconnect, OSError, RuntimeError):
            pass

    def abort(self) -> None:
        if self._code is None:
            self._code, self._reason = 1006, ""
        if self._abort is not None:
            self._abort()
