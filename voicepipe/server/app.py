"""The voicepipe server: /ws sessions plus the web/ page, on one port (python-websockets).

    server = Server(cfg, pipeline="loopback")
    await server.start()          # binds; server.port is the real port (0 → free port)
    ...
    await server.close()          # 1001 to every session, pipelines stopped, tasks reaped
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

from websockets.asyncio.server import Server as WsServer
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from voicepipe import pipelines
from voicepipe.config import Config
from voicepipe.core import protocol as P
from voicepipe.server import memory, static
from voicepipe.server.metrics import CONTENT_TYPE, ServerMetrics
from voicepipe.server.session import Session
from voicepipe.tracing import Tracer

log = logging.getLogger(__name__)


class Server:
    def __init__(self, cfg: Config, *, pipeline: str | None = None, host: str | None = None,
                 port: int | None = None, trace: str | Path | None = None) -> None:
        self.cfg = cfg
        self.pipeline_name = pipeline or cfg.server.pipeline
        pipelines.load(self.pipeline_name)  # fail fast on a bad name, before binding
        self.host = host if host is not None else cfg.server.host
        self.port = port if port is not None else cfg.server.port
        self.tracer = Tracer(trace or cfg.trace.file or None)
        self.web_root = static.web_root(cfg.server.web_root)
        self.sessions: set[Session] = set()
        self.metrics = ServerMetrics()
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
            compression=None,  # PCM barely deflates; the CPU is better spent on models
            server_header="voicepipe",
        )
        sock = next(iter(self._ws.sockets))
        self.port = sock.getsockname()[1]
        log.info("serving %s (pipeline %s, web root %s)", self.url, self.pipeline_name,
                 self.web_root)

    async def serve_forever(self, stop: asyncio.Event) -> None:
        await stop.wait()
        await self.close()

    async def close(self) -> None:
        if self._ws is None:
            return
        # close_connections=True sends 1001 "going away" to every live session.
        self._ws.close(close_connections=True)
        await self._ws.wait_closed()
        self._ws = None
        self.tracer.save()

    # ------------------------------------------------------------------ HTTP

    def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        if static.is_ws_request(request):
            origin = request.headers.get("Origin")
            host = request.headers.get("Host")
            if not static.origin_allowed(origin, host, self.cfg.server.allowed_origins):
                log.warning("refused origin %r (host %r)", origin, host)
                return static.text_response(403, f"{P.CLOSE_REASONS[P.CLOSE_BAD_ORIGIN]}\n")
            return None  # go on with the WebSocket handshake
        if request.path.split("?", 1)[0] == "/healthz":
            body = json.dumps({"sessions": len(self.sessions), "pipeline": self.pipeline_name})
            return static.response(200, body.encode(), "application/json")
        if request.path.split("?", 1)[0] == "/metrics":
            return static.response(200, self.metrics.render(), CONTENT_TYPE)
        return static.static_file(self.web_root, request.path)

    # ------------------------------------------------------------------ WebSocket

    async def _handle(self, ws: ServerConnection) -> None:
        if len(self.sessions) >= self.cfg.server.max_sessions:
            await ws.close(P.CLOSE_TOO_MANY_SESSIONS, P.CLOSE_REASONS[P.CLOSE_TOO_MANY_SESSIONS])
            return
        session = Session(self, ws)
        self.sessions.add(session)
        self.metrics.sessions.inc()
        self.metrics.active.inc()
        log.info("session %s opened from %s", session.id, ws.remote_address)
        try:
            await session.run()
        except Exception:  # never let one session take the server down
            log.exception("session %s crashed", session.id)
        finally:
            self.sessions.discard(session)
            self.metrics.active.dec()
            self.metrics.forget_session(session.id)
            # What went on the wire (websockets' own 1009/1001 win over ours).
            code = ws.close_code if ws.close_code is not None else session.close_code
            reason = ws.close_reason if ws.close_code is not None else session.close_reason
            log.info("session %s closed: %s %s", session.id, code, reason)
            if self.tracer.path is not None:  # readable while the server keeps running
                try:
                    self.tracer.save()
                except OSError as e:
                    log.warning("cannot write trace %s: %s", self.tracer.path, e)
            # What the session freed sits in glibc's per-thread arenas: give it back.
            del session
            await asyncio.to_thread(memory.release_free_memory)
            self.metrics.trims.inc()
