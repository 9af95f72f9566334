"""The voicepipe server: /ws sessions, the web/ page, health, metrics and the OpenAI
endpoints on one port: an ASGI app (server/asgi.py) on uvicorn.

    server = Server(cfg, pipeline="loopback")
    await server.start()          # binds; server.port is the real port (0 → free port)
    ...
    await server.close()          # stop accepting, let replies in flight finish (bounded),
                                  # 1001 to every session, pipelines stopped, tasks reaped

Admission (core/wire/admission.py): a connection waits for its hello in a pending pool
of its own, so idle sockets never take a session slot; the Origin and Host checks
(server/hosts.py) judge names against the server's own, never the client's Host.
``server.app`` is the ASGI app; ``start`` runs it on uvicorn with the protocol
limits of server/uvicorn_protocols.py (slowloris deadline, bounded send buffer).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import uvicorn

from voicepipe import pipelines
from voicepipe.config import Config
from voicepipe.core.wire import protocol as P
from voicepipe.core.wire.admission import Admission, Limits, Refusal
from voicepipe.server import asgi, memory, static, uvicorn_protocols
from voicepipe.server.hosts import OwnHosts, is_loopback
from voicepipe.server.metrics import ServerMetrics
from voicepipe.server.openai_api import OpenAIApi
from voicepipe.server.session import Session
from voicepipe.server.transport import MessageTransport
from voicepipe.server.turnlog import TurnLog
from voicepipe.tracing import Tracer

if TYPE_CHECKING:
    from voicepipe.otel import TurnExporter

log = logging.getLogger(__name__)
PING_INTERVAL_S = 20.0  # keepalive pings (and their pong deadline), as websockets' default
SHUTDOWN_GRACE_S = 5.0  # after the sessions: plain HTTP requests still being answered


class Server:
    def __init__(
        self,
        cfg: Config,
        *,
        pipeline: str | None = None,
        host: str | None = None,
        port: int | None = None,
        trace: str | Path | None = None,
        session_prefix: str = "",
    ) -> None:
        self.cfg = cfg
        self.session_prefix = session_prefix  # e.g. "<replica>-" under Ray Serve
        self.pipeline_name = pipeline or cfg.server.pipeline
        pipelines.load(self.pipeline_name)  # fail fast on a bad name, before binding
        self.host = host if host is not None else cfg.server.host
        self.port = port if port is not None else cfg.server.port
        self.tracer = Tracer(trace or cfg.trace.file or None)
        self.turns = TurnLog(self.pipeline_name, _models(cfg), _exporter(cfg, session_prefix))
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
        # The names the Origin/Host checks accept; start() renews them with the bound port
        # (another ASGI server running ``self.app`` keeps the configured host and port).
        self.own_hosts = OwnHosts(self.host, self.port)
        self._by_ticket: dict[int, Session] = {}
        self._no_sessions = asyncio.Event()  # set while no connection is open
        self._no_sessions.set()
        self._closing = False
        # The pipeline's models are in memory: a session can start now (until then, /readyz
        # and every session endpoint answer 503 "loading" with Retry-After).
        self.loaded = False
        self._uvicorn: uvicorn.Server | None = None
        self._stopping: uvicorn.Server | None = None  # while close() runs
        self._ticker: asyncio.Task[None] | None = None
        self.openai = OpenAIApi(self)  # /v1/models, /v1/chat/completions
        self.app = asgi.build(self)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}{static.WS_PATH}"

    async def load(self) -> None:
        """The pipeline's models into memory (seconds; a minute for a model packed for the
        first time); then ``readiness()`` can say yes."""
        t0 = time.monotonic()
        from voicepipe.stages import threads

        threads.configure(self.cfg)
        await asyncio.to_thread(pipelines.preload, self.pipeline_name, self.cfg)
        self.loaded = True
        log.info("pipeline %s ready in %.1f s", self.pipeline_name, time.monotonic() - t0)

    def readiness(self) -> str | None:
        """Why a new session cannot be served now, or None when it can: "loading" (the
        models are not in memory yet), "draining" (shutting down), "full" (server.max_sessions
        sessions open)."""
        if not self.loaded:
            return "loading"
        if self._closing:
            return "draining"
        if self.admission.sessions >= self.admission.limits.max_sessions:
            return "full"
        return None

    async def start(self) -> None:
        """Listen, then load the models: while they load the port answers /healthz (200)
        and /readyz (503 "loading"), and a session gets 503 with Retry-After. Returns
        once sessions can be served."""
        sockets = _bind(self.host, self.port)  # OSError here: the CLI says "cannot listen"
        self.port = sockets[0].getsockname()[1]
        self.own_hosts = OwnHosts(self.host, self.port)
        c = self.cfg.server
        http, ws = uvicorn_protocols.protocols(c.handshake_timeout_s)
        config = uvicorn.Config(
            self.app,
            http=http,
            ws=ws,
            lifespan="off",  # models are loaded by start() below, not in an ASGI lifespan
            ws_max_size=c.max_message_bytes,  # refused from the frame header: 1009
            ws_per_message_deflate=False,  # PCM barely deflates; the CPU is better spent on models
            ws_ping_interval=PING_INTERVAL_S,
            ws_ping_timeout=PING_INTERVAL_S,
            timeout_keep_alive=5,
            h11_max_incomplete_event_size=16 * 1024,  # a request head above this: 400
            timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S),
            proxy_headers=False,  # the peer's own address counts for admission, not a header
            server_header=False,
            headers=[("server", "voicepipe")],
            access_log=False,
            log_config=None,
        )
        config.load()
        # uvicorn logs a line per connection (INFO) and per malformed request (WARNING):
        # a flood of garbage must not flood the log. Its errors stay; -v shows it all.
        uv_log = logging.getLogger("uvicorn.error")
        if uv_log.level == logging.NOTSET and logging.getLogger().level > logging.DEBUG:
            uv_log.setLevel(logging.ERROR)
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=sockets)
        self._uvicorn = server
        # uvicorn's once-a-second tick keeps its Date header current (no signal handling
        # of its own: `voicepipe serve` owns SIGINT/SIGTERM).
        self._ticker = asyncio.create_task(server.main_loop(), name="uvicorn-tick")
        log.info(
            "listening on %s (pipeline %s, web root %s); loading its models",
            self.url,
            self.pipeline_name,
            self.web_root,
        )
        if not is_loopback(self.host) and not self.cfg.server.auth_token:
            log.warning(
                "listening on %s beyond loopback with no server.auth_token: anyone "
                "who can reach this port can open sessions (see docs/PROTOCOL.md, "
                '"Origins and auth")',
                self.host,
            )
        try:
            await self.load()
        except BaseException:  # a model that cannot load: no half-started server left behind
            await self.close(0)
            raise

    async def serve_forever(self, stop: asyncio.Event) -> None:
        await stop.wait()
        await self.close()

    async def close(self, drain_s: float | None = None) -> None:
        """Stop accepting; let every reply in flight finish for at most ``drain_s``
        (default ``server.drain_timeout_s``; 0: none), then close all with 1001."""
        server = self._uvicorn
        if server is None:
            return
        self._uvicorn = None
        self._stopping = server
        for listener in server.servers:  # stop listening; sessions stay for now
            listener.close()
        await self.drain(drain_s)
        server.should_exit = True
        if self._ticker is not None:
            await self._ticker
            self._ticker = None
        await server.shutdown()  # plain HTTP connections: idle ones closed, busy ones bounded
        self._stopping = None
        self.tracer.save()
        await asyncio.to_thread(self.flush_exports)  # blocking HTTP, bounded by its timeout

    def flush_exports(self) -> None:
        """The turns' traces still queued go to the collector (bounded by its timeout)."""
        if self.turns.exporter is not None:
            self.turns.exporter.shutdown()

    async def drain(self, drain_s: float | None = None) -> None:
        """No new sessions; those with a reply in flight finish it (at most ``drain_s``),
        the others close with 1001 now. (Under another ASGI server, e.g. a Ray Serve
        replica leaving, this is the whole shutdown; ``close`` adds uvicorn's.)"""
        drain_s = self.cfg.server.drain_timeout_s if drain_s is None else drain_s
        self._closing = True
        for session in list(self.sessions):
            session.drain()
        try:
            await asyncio.wait_for(self._no_sessions.wait(), drain_s)
        except asyncio.TimeoutError:
            if drain_s > 0:
                log.warning("replies still in flight after %.1f s: closing them", drain_s)
            self._end_sessions()
            await self._no_sessions.wait()

    def hurry(self) -> None:
        """Shutting down and out of patience: close every session now with 1001 (and
        stop waiting for HTTP requests still being answered)."""
        if self._stopping is not None:
            self._stopping.force_exit = True
        self._end_sessions()

    def _end_sessions(self) -> None:
        for session in list(self.sessions):
            session.end(P.CLOSE_GOING_AWAY, P.CLOSE_REASONS[P.CLOSE_GOING_AWAY])

    def voice_busy(self) -> bool:
        """A voice turn is being heard or answered in some session: from the user's first
        speech to the reply's end (the /v1 API then keeps to its budget:
        stages/llm/voice_first.py)."""
        return any(s.voice_active for s in self.sessions)

    # ------------------------------------------------------------------ admission

    def admit(self, session: Session) -> Refusal | None:
        """A valid hello: make the connection a session, or say why not."""
        refusal = self.admission.hello(session.ticket)
        if refusal is None:
            self.metrics.sessions.inc()
            self.metrics.active.inc()
            self.turns.session_started(session.id, session.endpoint, session.ticket.address)
        return refusal

    # ------------------------------------------------------------------ HTTP

    def host_allowed(self, host: str | None) -> bool:
        """DNS rebinding: a browser sent here under a name that is not ours is refused.
        (No Host header: not a browser.)"""
        if host is None or self.own_hosts.owns(host):
            return True
        allowed = self.cfg.server.allowed_origins
        return "*" in allowed or any(urlsplit(a).netloc.lower() == host.lower() for a in allowed)

    def origin_allowed(self, origin: str | None) -> bool:
        return self.own_hosts.origin_allowed(origin, self.cfg.server.allowed_origins)

    # ------------------------------------------------------------------ WebSocket

    async def serve_connection(
        self, transport: MessageTransport, session_type: type[Session] = Session
    ) -> None:
        """One accepted WebSocket from its first message to its last: admission, the
        session, then everything it held given back. ``session_type``: what speaks the
        endpoint's protocol (``Session``: protocol v1 on /ws; another endpoint passes its
        subclass, with the same admission, drain, close codes and teardown)."""
        address = transport.remote_address
        ticket, evicted = self.admission.connect(address)
        for old in evicted:  # the pending pool was full: its oldest make room
            victim = self._by_ticket.get(old.id)
            if victim is not None:
                victim.end(P.CLOSE_POLICY, "policy violation: too many pending connections")
        session = session_type(self, transport, ticket)
        self.sessions.add(session)
        self._no_sessions.clear()
        if self._closing:  # upgraded just as the server stopped listening
            session.drain()
        self.sessions.add(session)
        self._by_ticket[ticket.id] = session
        log.debug("connection %s from %s", session.id, address)
        try:
            await session.run()
        except Exception:  # never let one session take the server down
            log.exception("session %s crashed", session.id)
        finally:
            self.sessions.discard(session)
            if not self.sessions:
                self._no_sessions.set()
            self._by_ticket.pop(ticket.id, None)
            self.admission.close(ticket)
            if session.admitted:
                self.metrics.active.dec()
            self.metrics.forget_session(session.id)
            # What went on the wire (the WebSocket layer's own 1007/1009 win over ours).
            code, reason = session.close_code, session.close_reason
            if transport.close_code is not None:
                code, reason = transport.close_code, transport.close_reason
            self.metrics.closes.labels(str(code)).inc()
            if session.admitted:
                self.turns.session_ended(session.id, code, reason, session.age_s)
            elif code != P.CLOSE_NORMAL:
                log.info("connection %s closed before its hello: %s %s", session.id, code, reason)
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


def _models(cfg: Config) -> dict[str, str]:
    """The models a turn runs through, as its trace's attributes say."""
    return {
        "asr": cfg.asr.model,
        "llm": cfg.llm.model,
        "tts": f"{cfg.tts.backend}:{cfg.codec.model}",
        "vocoder": cfg.codec.vocoder,
    }


def _exporter(cfg: Config, session_prefix: str) -> TurnExporter | None:
    if not cfg.trace.otlp_endpoint:
        return None
    from voicepipe.otel import TurnExporter

    replica = {"service.instance.id": session_prefix.rstrip("-")} if session_prefix else {}
    return TurnExporter(cfg.trace.otlp_endpoint, resource=replica)


def _bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for ``host`` (every address it resolves to; "" = every
    interface), all on one port: ``port``, or the first one's free port when 0."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen = set()
    try:
        for family, kind, proto, _, addr in infos:
            if (family, addr[0]) in seen:
                continue
            seen.add((family, addr[0]))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            bound_port = sockets[0].getsockname()[1] if len(sockets) > 1 else port
            sock.bind((addr[0], bound_port, *addr[2:]))
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
