"""The voicepipe server: /ws sessions plus the web/ page, on one port (python-websockets).

    server = Server(cfg, pipeline="loopback")
    await server.start()          # binds; server.port is the real port (0 → free port)
    ...
    await server.close()          # stop accepting, let replies in flight finish (bounded),
                                  # 1001 to every session, pipelines stopped, tasks reaped

Admission (core/admission.py): a connection waits for its hello in a pending pool
of its own, so idle sockets never take a session slot; the Origin and Host checks
(server/hosts.py) judge names against the server's own, never the client's Host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

from websockets.asyncio.server import Server as WsServer
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from voicepipe import pipelines
from voicepipe.config import Config
from voicepipe.core import protocol as P
from voicepipe.core.admission import Admission, Limits, Refusal
from voicepipe.server import memory, static
from voicepipe.server.hosts import OwnHosts, is_loopback
from voicepipe.server.metrics import CONTENT_TYPE, ServerMetrics
from voicepipe.server.session import Session
from voicepipe.tracing import Tracer

log = logging.getLogger(__name__)
SEND_BUFFER_BYTES = 128 * 1024  # ~0.7 s of 48 kHz PCM16 (the kernel doubles it)


class Server:
    def __init__(
        self,
        cfg: Config,
        *,
        pipeline: str | None = None,
        host: str | None = None,
        port: int | None = None,
        trace: str | Path | None = None,
    ) -> None:
        self.cfg = cfg
        self.pipeline_name = pipeline or cfg.server.pipeline
        pipelines.load(self.pipeline_name)  # fail fast on a bad name, before binding
        self.host = host if host is not None else cfg.server.host
        self.port = port if port is not None else cfg.server.port
        self.tracer = Tracer(trace or cfg.trace.file or None)
        self.web_root = static.web_root(cfg.server.web_root)
        self.sessions: set[Session] = set()  # every open connection, admitted or pending
        self.metrics = ServerMetrics()
        c = cfg.server
        self.admission = Admission(
            Limits(
                max_sessions=c.max_sessions,
                max_pending=c.max_pending,
                max_pending_per_address=c.max_pending_per_address,
                max_sessions_per_address=c.max_sessions_per_address,
            )
        )
        self.own_hosts: OwnHosts | None = None
        self._by_ticket: dict[int, Session] = {}
        self._ws: WsServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}{static.WS_PATH}"

    async def start(self) -> None:
        t0 = time.monotonic()
        await asyncio.to_thread(pipelines.preload, self.pipeline_name, self.cfg)
        log.info("pipeline %s ready in %.1f s", self.pipeline_name, time.monotonic() - t0)
        self._ws = await serve(
            self._handle,
            self.host,
            self.port,
            process_request=self._process_request,
            max_size=self.cfg.server.max_message_bytes,
            # Let the session report codes itself; websockets' own 1009 covers oversize.
            close_timeout=2,
            open_timeout=self.cfg.server.handshake_timeout_s,
            compression=None,  # PCM barely deflates; the CPU is better spent on models
            server_header="voicepipe",
        )
        sock = next(iter(self._ws.sockets))
        self.port = sock.getsockname()[1]
        self.own_hosts = OwnHosts(self.host, self.port)
        log.info(
            "serving %s (pipeline %s, web root %s)", self.url, self.pipeline_name, self.web_root
        )
        if not is_loopback(self.host) and not self.cfg.server.auth_token:
            log.warning(
                "listening on %s beyond loopback with no server.auth_token: anyone "
                "who can reach this port can open sessions (see docs/PROTOCOL.md, "
                '"Origins and auth")',
                self.host,
            )

    async def serve_forever(self, stop: asyncio.Event) -> None:
        await stop.wait()
        await self.close()

    async def close(self, drain_s: float | None = None) -> None:
        """Stop accepting; let every reply in flight finish for at most ``drain_s``
        (default ``server.drain_timeout_s``; 0: none), then close all with 1001."""
        if self._ws is None:
            return
        drain_s = self.cfg.server.drain_timeout_s if drain_s is None else drain_s
        # Stop listening; sessions stay until they finish or the bound passes.
        self._ws.close(close_connections=False)
        for session in list(self.sessions):
            session.drain()
        try:
            await asyncio.wait_for(self._ws.wait_closed(), drain_s)
        except asyncio.TimeoutError:
            if drain_s > 0:
                log.warning("replies still in flight after %.1f s: closing them", drain_s)
            self.hurry()
            await self._ws.wait_closed()
        self._ws = None
        self.tracer.save()

    def hurry(self) -> None:
        """Shutting down and out of patience: close every session now with 1001."""
        for session in list(self.sessions):
            session.end(P.CLOSE_GOING_AWAY, P.CLOSE_REASONS[P.CLOSE_GOING_AWAY])

    # ------------------------------------------------------------------ admission

    def admit(self, session: Session) -> Refusal | None:
        """A valid hello: make the connection a session, or say why not."""
        refusal = self.admission.hello(session.ticket)
        if refusal is None:
            self.metrics.sessions.inc()
            self.metrics.active.inc()
        return refusal

    # ------------------------------------------------------------------ HTTP

    def _host_allowed(self, host: str | None) -> bool:
        """DNS rebinding: a browser sent here under a name that is not ours is refused.
        (No Host header: not a browser.)"""
        assert self.own_hosts is not None
        if host is None or self.own_hosts.owns(host):
            return True
        allowed = self.cfg.server.allowed_origins
        return "*" in allowed or any(urlsplit(a).netloc.lower() == host.lower() for a in allowed)

    def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        assert self.own_hosts is not None
        hosts, origins = (request.headers.get_all(h) for h in ("Host", "Origin"))
        if len(hosts) > 1 or len(origins) > 1:
            return static.text_response(400, "more than one Host or Origin header\n")
        host = hosts[0] if hosts else None
        origin = origins[0] if origins else None
        if static.is_ws_request(request):
            if not self.own_hosts.origin_allowed(origin, self.cfg.server.allowed_origins):
                log.warning("refused origin %r (host %r)", origin, host)
                return static.text_response(403, f"{P.CLOSE_REASONS[P.CLOSE_BAD_ORIGIN]}\n")
            return None  # go on with the WebSocket handshake
        if not self._host_allowed(host):
            log.warning("refused HTTP request for host %r", host)
            return static.text_response(403, "unknown host\n")
        if request.path.split("?", 1)[0] == "/healthz":
            body = json.dumps(
                {
                    "sessions": self.admission.sessions,
                    "pending": self.admission.pending,
                    "pipeline": self.pipeline_name,
                }
            )
            return static.response(200, body.encode(), "application/json")
        if request.path.split("?", 1)[0] == "/metrics":
            return static.response(200, self.metrics.render(), CONTENT_TYPE)
        return static.static_file(self.web_root, request.path)

    # ------------------------------------------------------------------ WebSocket

    async def _handle(self, ws: ServerConnection) -> None:
        address = str(ws.remote_address[0]) if ws.remote_address else "?"
        sock = ws.transport.get_extra_info("socket")
        if sock is not None:
            # A fixed kernel send buffer (Linux would grow it to MBs for a client that
            # stops reading): with websockets' own write limit, what one session can hold
            # unsent is bounded, and send_timeout_s notices a client that stopped reading.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        ticket, evicted = self.admission.connect(address)
        for old in evicted:  # the pending pool was full: its oldest make room
            victim = self._by_ticket.get(old.id)
            if victim is not None:
                victim.end(P.CLOSE_POLICY, "policy violation: too many pending connections")
        session = Session(self, ws, ticket)
        self.sessions.add(session)
        self._by_ticket[ticket.id] = session
        log.debug("connection %s from %s", session.id, address)
        try:
            await session.run()
        except Exception:  # never let one session take the server down
            log.exception("session %s crashed", session.id)
        finally:
            self.sessions.discard(session)
            self._by_ticket.pop(ticket.id, None)
            self.admission.close(ticket)
            if session.admitted:
                self.metrics.active.dec()
            self.metrics.forget_session(session.id)
            # What went on the wire (websockets' own 1007/1009 win over ours).
            code = ws.close_code if ws.close_code is not None else session.close_code
            reason = ws.close_reason if ws.close_code is not None else session.close_reason
            self.metrics.closes.labels(str(code)).inc()
            if session.admitted or code != P.CLOSE_NORMAL:
                log.info("session %s closed: %s %s", session.id, code, reason)
            admitted = session.admitted
            del session
            # Never a session: no pipeline ran, no spans, next to nothing to free. A churn
            # of such connections must cost no file writes and no malloc_trim (which locks
            # the arenas the live sessions' model threads allocate from).
            if admitted:
                await self._after_session()

    async def _after_session(self) -> None:
        if self.tracer.path is not None:  # readable while the server keeps running
            try:
                self.tracer.save()
            except OSError as e:
                log.warning("cannot write trace %s: %s", self.tracer.path, e)
        # What the session freed sits in glibc's per-thread arenas: give it back.
        await asyncio.to_thread(memory.release_free_memory)
        self.metrics.trims.inc()
