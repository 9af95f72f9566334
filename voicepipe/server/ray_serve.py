"""voicepipe on Ray Serve: the server's ASGI app (server/asgi.py) as the ingress of a Serve
deployment, one ``Server`` per replica, behind Serve's HTTP proxy on server.host:server.port.

    app = application(cfg, "assistant")          # a Serve application, not yet running
    run(cfg, "assistant", stop)                  # connect/start Ray, serve.run, wait, shut down

Clients keep ws://HOST:PORT/ws, the page, /healthz, /metrics and /v1 unchanged: the proxy
hands each request, a WebSocket included, to one replica, and a WebSocket stays on that
replica until it closes (a session never moves). Each replica preloads the pipeline's models
once and keeps its sessions local; its session ids start with its replica id.

Start-up: the ingress listens at once, replicas come later. The first replica (none of the
deployment running yet) joins the ingress before its models are in, answering /readyz and
each new session with 503 ``loading`` and Retry-After until they are; a later one (scale-up,
redeploy) loads in its constructor, so Serve sends it nothing until it can serve. Before
any replica is up, Serve's Python proxy answers 503 ``starting`` (ray_proxy.NotDeployedYet),
and so does its HAProxy ingress, whose config template's no-route 404 a worker setup hook
rewrites (ray_haproxy).

Autoscaling: a WebSocket session is one ongoing request for as long as it is open, so
Serve's ``target_ongoing_requests`` is the target of open sessions per replica. A replica
that leaves (scale-down, redeploy) takes no new sessions and lets its own go on, for
``ray.leave_timeout_s`` at most; then they finish the reply in flight (for
``server.drain_timeout_s`` at most), close with 1001, and the client reconnects to another
replica. Serve itself only waits for a leaving replica's ongoing requests to end, which for
a conversation may be never, and offers no hook at the start of that wait: hence
``_ShutdownWatch``. When the operator stops ``serve --ray`` (the application is deleted),
replicas drain at once, as one ``serve`` process does on SIGTERM.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray import serve

from voicepipe.config import Config, ConfigError, RayConfig
from voicepipe.server import ray_haproxy, ray_proxy
from voicepipe.server.app import Server

log = logging.getLogger(__name__)
APP_NAME = "voicepipe"
DEPLOYMENT = "VoiceReplica"
WATCH_INTERVAL_S = 0.25  # how soon a leaving replica notices it is leaving
LEAVE_POLL_S = 1.0  # then how often it asks whether its sessions must go now
PROXY_LOCATIONS = ("HeadOnly", "EveryNode")


def check(c: RayConfig) -> None:
    """Values Serve would refuse later, or accept and misbehave with: named now."""
    if c.min_replicas < 0:
        raise ConfigError(f"ray.min_replicas: must be >= 0, got {c.min_replicas}")
    if c.max_replicas < max(1, c.min_replicas):
        raise ConfigError(
            f"ray.max_replicas: must be >= 1 and >= ray.min_replicas ({c.min_replicas}), "
            f"got {c.max_replicas}"
        )
    if c.target_sessions_per_replica < 1:
        raise ConfigError(
            f"ray.target_sessions_per_replica: must be >= 1, got {c.target_sessions_per_replica}"
        )
    if c.replica_cpus < 0:
        raise ConfigError(f"ray.replica_cpus: must be >= 0, got {c.replica_cpus}")
    ray_proxy.serve_env(c)  # ray.ingress
    if c.proxy_location not in PROXY_LOCATIONS:
        raise ConfigError(
            f"ray.proxy_location: expected one of {', '.join(PROXY_LOCATIONS)}, "
            f"got {c.proxy_location!r}"
        )


class _ShutdownWatch:
    """Tells when Serve starts stopping this replica.

    Serve marks its replica object ``_shutting_down`` when the controller asks it to stop,
    then waits for the ongoing requests (our sessions) to end before it calls ``__del__``:
    too late to ask them to end. The replica object lives in this process; it is found once.
    Should a Ray release rename it, ``draining`` stays False and a leaving replica's
    sessions run until they end or Serve's graceful_shutdown_timeout_s passes (a warning
    says so at start)."""

    def __init__(self) -> None:
        self._replica: Any = None
        try:
            from ray.serve._private.replica import Replica

            self._replica = next((o for o in gc.get_objects() if isinstance(o, Replica)), None)
        except ImportError:
            pass
        if self._replica is None or not hasattr(self._replica, "_shutting_down"):
            self._replica = None
            log.warning("cannot see Serve's draining flag: scale-down will not drain sessions")

    @property
    def draining(self) -> bool:
        return self._replica is not None and bool(self._replica._shutting_down)


def replica_states(app_name: str = APP_NAME) -> dict[str, int]:
    """The deployment's replicas by state, e.g. {"RUNNING": 2} (a driver of the cluster)."""
    app = serve.status().applications.get(app_name)
    if app is None or DEPLOYMENT not in app.deployments:
        return {}
    return {str(k): v for k, v in app.deployments[DEPLOYMENT].replica_states.items()}


def _others_running(app_name: str) -> bool:
    """Another replica of the deployment already serves (asked from a starting replica;
    if Serve cannot say, none is assumed: the replica then answers "loading" early)."""
    try:
        return replica_states(app_name).get("RUNNING", 0) > 0
    except Exception:
        log.warning("cannot read Serve's replica states: starting as the first replica")
        return False


def _app_deleted(app_name: str) -> bool:
    """The whole application is going (``serve.delete``), not just this replica."""
    app = serve.status().applications.get(app_name)
    return app is None or getattr(app.status, "value", app.status) == "DELETING"


@serve.ingress()
class VoiceReplica:
    """One replica: a ``Server`` whose ASGI app Serve's proxy calls. Built with the config
    and the address clients reach the proxy at (the Origin/Host checks judge that one)."""

    # Serve awaits an async constructor (mypy wants __init__ to return None).
    async def __init__(  # type: ignore[misc]
        self, cfg: Config, pipeline: str, host: str, port: int, log_format: str = "text"
    ) -> None:
        context = serve.get_replica_context()
        if log_format == "json":  # the session and turn lines, as `serve --log-format json`
            _json_session_log()
        self.replica_id = context.replica_id.unique_id
        self.app_name = context.app_name
        self.server = Server(
            cfg, pipeline=pipeline, host=host, port=port, session_prefix=f"{self.replica_id}-"
        )
        self._load_error: BaseException | None = None
        if await asyncio.to_thread(_others_running, self.app_name):
            # Scale-up or redeploy: Serve routes here only once this returns, and the
            # replicas already running take the sessions meanwhile.
            await self.server.load()
        else:
            # The first replica: no other can answer, so it joins the ingress at once and
            # answers "loading" (503, Retry-After; /readyz) while its models load, instead
            # of the ingress's 404 for a route with no replica.
            self._loader = asyncio.create_task(self._load(), name="load-models")
        log.info("replica %s: pipeline %s (pid %d)", self.replica_id, pipeline, os.getpid())
        self._watch = _ShutdownWatch()
        self._drained = False
        self._watcher = asyncio.create_task(self._watch_shutdown(), name="shutdown-watch")

    async def _load(self) -> None:
        try:
            await self.server.load()
        except Exception as e:  # check_health reports it: Serve replaces this replica
            log.exception("replica %s: cannot load pipeline", self.replica_id)
            self._load_error = e

    def check_health(self) -> None:
        """Serve's periodic health check: a replica whose models failed to load is
        unhealthy (Serve starts another)."""
        if self._load_error is not None:
            raise RuntimeError(f"pipeline failed to load: {self._load_error}")

    def __serve_build_asgi_app__(self) -> Any:
        return self.server.app

    async def _watch_shutdown(self) -> None:
        # A flag of Serve's, not an event: polled (it is set once, when the replica leaves).
        while not self._watch.draining:  # noqa: ASYNC110
            await asyncio.sleep(WATCH_INTERVAL_S)
        # No new sessions come here now; the open ones may end by themselves, for a while.
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        log.info("replica %s leaving: %d sessions", self.replica_id, len(self.server.sessions))
        leave_s = self.server.cfg.ray.leave_timeout_s
        while self.server.sessions and loop.time() < t0 + leave_s:
            if await asyncio.to_thread(_app_deleted, self.app_name):
                break  # the operator stopped it all: no waiting for sessions to end
            await asyncio.sleep(LEAVE_POLL_S)
        await self._drain()

    async def _drain(self) -> None:
        if not self._drained:
            self._drained = True
            await self.server.drain()

    async def __del__(self) -> None:
        self._watcher.cancel()
        await self._drain()
        self.server.tracer.save()
        await asyncio.to_thread(self.server.flush_exports)

    def info(self) -> dict[str, Any]:
        """Which replica, process and sessions (for tests and operators, via a handle)."""
        return {
            "replica": self.replica_id,
            "pid": os.getpid(),
            "sessions": sorted(s.id for s in self.server.sessions),
        }


def _json_session_log() -> None:
    """In a replica, Serve owns the logging set-up: the session and turn lines get a
    handler of their own, on stderr (which Ray forwards to the driver), in JSON."""
    import sys

    from voicepipe import logs

    sessions = logging.getLogger("voicepipe.sessions")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logs.JsonFormatter())
    sessions.addHandler(handler)
    sessions.setLevel(logging.INFO)
    sessions.propagate = False


def application(cfg: Config, pipeline: str, host: str, port: int, log_format: str = "text") -> Any:
    """The Serve application: ``VoiceReplica`` with the autoscaling and drain of [ray]."""
    c = cfg.ray
    check(c)
    deployment = serve.deployment(
        VoiceReplica,
        name=DEPLOYMENT,
        # Every session, plus room for the HTTP requests (health, metrics, page) beside them:
        # past this the proxy queues new requests instead of handing them over.
        max_ongoing_requests=cfg.server.max_sessions + cfg.server.max_pending,
        autoscaling_config={
            "min_replicas": c.min_replicas,
            "initial_replicas": max(1, c.min_replicas),
            "max_replicas": c.max_replicas,
            "target_ongoing_requests": c.target_sessions_per_replica,
            "upscale_delay_s": c.upscale_delay_s,
            "downscale_delay_s": c.downscale_delay_s,
            # Averaged over a few pushes (ray_proxy.serve_env): quick, not jumpy.
            "metrics_interval_s": ray_proxy.METRICS_PUSH_S,
            "look_back_period_s": 3.0,
        },
        # Sessions may end by themselves, then replies in flight finish, then a margin:
        # only past that does Serve kill the replica.
        graceful_shutdown_timeout_s=c.leave_timeout_s + cfg.server.drain_timeout_s + 5.0,
        graceful_shutdown_wait_loop_s=0.5,
        ray_actor_options={"num_cpus": c.replica_cpus},
    )
    return deployment.bind(cfg, pipeline, host, port, log_format)  # type: ignore[attr-defined]


def job_env(c: RayConfig) -> dict[str, Any]:
    """The runtime_env of the Ray job: the Serve controller, proxy and replicas it starts
    inherit ``ray_proxy.serve_env``; the workers find this checkout's voicepipe first when it runs
    from one (an installed package is found as it is)."""
    env = ray_proxy.serve_env(c)
    root = Path(__file__).resolve().parents[2]
    if "site-packages" not in root.parts and (root / "voicepipe").is_dir():
        path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
        env["PYTHONPATH"] = path
    out: dict[str, Any] = {"env_vars": env}
    if c.ingress == "haproxy":  # its no-route 404 becomes 503 starting (ray_haproxy)
        out["worker_process_setup_hook"] = ray_haproxy.WORKER_HOOK
    return out


def connect(cfg: Config) -> None:
    """Join the cluster at ray.address, or start a one-box one (no dashboard)."""
    import ray

    c = cfg.ray
    kwargs: dict[str, Any] = {"runtime_env": job_env(c), "logging_level": logging.WARNING}
    if c.address:
        ray.init(address=c.address, **kwargs)
    else:
        ray.init(include_dashboard=False, num_cpus=c.num_cpus or None, **kwargs)


async def run(
    cfg: Config,
    pipeline: str,
    host: str,
    port: int,
    stop: asyncio.Event,
    ready: Callable[[], None] | None = None,
    log_format: str = "text",
) -> None:
    """Deploy, serve until ``stop`` is set, then take the application down (every replica
    drains) and leave the cluster."""
    import ray

    check(cfg.ray)
    connect(cfg)
    try:
        serve.start(http_options={"host": host, "port": port, "location": cfg.ray.proxy_location})
        await asyncio.to_thread(
            serve.run,
            application(cfg, pipeline, host, port, log_format),
            name=APP_NAME,
            route_prefix="/",
        )
        if ready is not None:
            ready()
        await stop.wait()
        # The application goes: every replica drains now (not after ray.leave_timeout_s:
        # they see it deleted). A cluster started here goes with its proxy and controller.
        await asyncio.to_thread(serve.delete, APP_NAME)
        if not cfg.ray.address:
            await asyncio.to_thread(serve.shutdown)
    finally:
        ray.shutdown()
