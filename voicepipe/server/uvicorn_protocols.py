"""uvicorn's HTTP and WebSocket protocols, with the limits a server facing the open
network needs and uvicorn leaves out.

- ``HeadDeadlineH11``: a request's head (request line and headers) must arrive within
  ``server.handshake_timeout_s`` of the connection (or of the previous response on
  a kept-alive one), or the connection is closed: a slowloris that trickles a
  WebSocket upgrade byte by byte holds nothing for long. (uvicorn's own
  ``timeout_keep_alive`` only covers the silence between requests.)
- ``VoiceWebSocket`` (websockets' sans-I/O protocol underneath):
  * a fixed kernel send buffer (Linux grows it to MBs for a client that stops
    reading); with asyncio's write-buffer flow control, a send then waits, and the
    session's ``send_timeout_s`` notices the client that stopped reading;
  * the transport's ``abort`` in the ASGI scope (``transport.ABORT_EXTENSION``), so
    the session can cut a connection whose close frame cannot be delivered;
  * a text frame that is not UTF-8 closes with 1007 and the documented reason
    (uvicorn's own close carries none);
  * failing the connection (1007, an oversize message's 1009) sends the close frame
    and a FIN, then discards what the client still sends until it hangs up (bounded):
    closing at once with unread input would reset the connection, and the client could
    lose the close frame and its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

from voicepipe.core.wire import protocol as P
from voicepipe.server.transport import ABORT_EXTENSION

SEND_BUFFER_BYTES = 128 * 1024  # ~0.7 s of 48 kHz PCM16 (the kernel doubles it)
CLOSE_TIMEOUT_S = 2.0  # wait for the client's close frame (then the TCP connection goes)


class HeadDeadlineH11(H11Protocol):
    head_timeout_s = 10.0  # set per server (a subclass made by ``protocols``)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm_head_deadline()

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_too_slow)

    def _disarm_head_deadline(self) -> None:
        if getattr(self, "_head_timer", None) is not None:
            self._head_timer.cancel()  # type: ignore[union-attr]
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def handle_events(self) -> None:
        # A whole request head was parsed when a new request/response cycle began.
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle or self.transport.is_closing():
            self._disarm_head_deadline()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._disarm_head_deadline()
        super().handle_websocket_upgrade(event)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_deadline()  # the next request on this connection has its own

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)


class VoiceWebSocket(WebSocketsSansIOProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.close_timeout = CLOSE_TIMEOUT_S
        self._failed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)
        if scope is not None:  # set before the ASGI task first runs
            scope["extensions"][ABORT_EXTENSION] = {"abort": self.transport.abort}

    def data_received(self, data: bytes) -> None:
        if self._failed:
            return  # failed: the client's remaining bytes are dropped until it hangs up
        super().data_received(data)

    def send_receive_event_to_app(self) -> None:
        if self.curr_msg_data_type == "text" and not self.close_sent:
            try:
                b"".join(self.frames).decode()
            except UnicodeDecodeError as e:
                self.frames = []
                if self.conn.state is State.OPEN:
                    what = P.CLOSE_REASONS[P.CLOSE_INVALID_DATA]
                    reason = f"{what}: {e.reason} at position {e.start}"
                    self.conn.fail(P.CLOSE_INVALID_DATA, reason)
                    self.handle_parser_exception()
                return
        super().send_receive_event_to_app()

    def handle_parser_exception(self) -> None:
        if self._failed:
            return
        self._failed = True
        sent = self.conn.close_sent
        code, reason = (sent.code, sent.reason) if sent is not None else (1006, "")
        self.queue.put_nowait({"type": "websocket.disconnect", "code": code, "reason": reason})
        self.close_sent = True
        for chunk in self.conn.data_to_send():
            if chunk:
                self.transport.write(chunk)
            elif self.transport.can_write_eof() and not self.transport.is_closing():
                self.transport.write_eof()  # websockets' end-of-data marker: our FIN
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
        if self.close_timer is None:
            self.close_timer = self.loop.call_later(self.close_timeout, self.transport.abort)


def protocols(head_timeout_s: float) -> tuple[type[HeadDeadlineH11], type[VoiceWebSocket]]:
    """The protocol classes for one server's uvicorn config."""
    http = type("HeadDeadlineH11", (HeadDeadlineH11,), {"head_timeout_s": head_timeout_s})
    return http, VoiceWebSocket
