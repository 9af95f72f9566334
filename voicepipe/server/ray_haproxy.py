"""Serve's HAProxy ingress, told to say "starting" instead of 404 before the first replica.

Serve's HAProxy listens as soon as Serve starts, and until the application's first replica
is running it has no route for any path: its config's ``default_backend`` answers every
request, a WebSocket upgrade too, with 404 "Path '…' not found". A load balancer or a client
reads that as a broken server where a short wait would do. voicepipe's one application
serves every path under "/", so for it a request with no route means "not deployed yet":
503 with ``Retry-After`` and ``{"ready": false, "reason": "starting"}`` (what the replica
answers while it loads, and what Serve's Python proxy answers through
``ray_proxy.NotDeployedYet``), and ``/healthz`` 200 (a liveness probe must not restart a
server that is starting).

The config comes from a Jinja template, a module constant of Serve's that no option reaches.
Ray runs ``WORKER_HOOK`` (``worker_process_setup_hook`` in the job's runtime_env,
``ray_serve.job_env``) in every worker process at its start, the HAProxy manager's among
them, before that worker imports Serve's HAProxy module: the hook rewrites the template's
default backend there. Should a Ray release change the template so that the rewrite no
longer matches, the hook leaves it as it is and logs a warning (and
tests/e2e/test_ray_startup.py fails on the pinned release).
"""

from __future__ import annotations

import logging
import re
import sys

from voicepipe.server.ray_proxy import LIVE_BODY, RETRY_AFTER_S, STARTING_BODY

log = logging.getLogger(__name__)

WORKER_HOOK = "voicepipe.server.ray_haproxy.starting_not_404"
TEMPLATES = "ray.serve._private.haproxy_templates"

# The default backend's one rule: `http-request return status 404 ... "Path '...' not found..."`
_DEFAULT_404 = re.compile(
    r"(?m)^(backend default_backend\n)([ \t]+)http-request return status 404[^\n]*"
)


def _quoted(body: bytes) -> str:
    """A body as one of HAProxy's double-quoted strings (its quotes escaped)."""
    return '"' + body.decode().strip().replace("\\", "\\\\").replace('"', '\\"') + '"'


def rewrite(template: str) -> str | None:
    """The template with its no-route answer made "starting"; None if it has no such rule."""

    def rules(m: re.Match[str]) -> str:
        ind = m.group(2)
        return (
            f"{m.group(1)}"
            f"{ind}http-request return status 200 content-type application/json "
            f"string {_quoted(LIVE_BODY)} if {{ path /healthz }}\n"
            f"{ind}http-request return status 503 content-type application/json "
            f"hdr Retry-After {RETRY_AFTER_S} string {_quoted(STARTING_BODY)}"
        )

    out, n = _DEFAULT_404.subn(rules, template, count=1)
    return out if n == 1 else None


def starting_not_404() -> None:
    """Ray's worker setup hook: rewrite Serve's HAProxy template in this process."""
    import importlib

    try:
        mod = importlib.import_module(TEMPLATES)
    except ImportError:  # a Ray without the HAProxy ingress: nothing to do
        return
    new = rewrite(mod.HAPROXY_CONFIG_TEMPLATE)
    if new is None:
        log.warning(
            "Serve's HAProxy template has no 404 default backend as expected: clients that "
            "come before the first replica get Serve's 404 instead of 503 starting"
        )
        return
    # (Serve's HAProxy module, if imported already, holds its own name for the old one)
    for m in (mod, sys.modules.get("ray.serve._private.haproxy")):
        if m is not None:
            m.__dict__["HAPROXY_CONFIG_TEMPLATE"] = new
