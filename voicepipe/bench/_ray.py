"""A Ray cluster of separate node processes on this machine, for benchmarks and tests.

    with local_cluster([1, 1]) as cluster:      # a head and a second node, 1 CPU each
        ... voicepipe serve --ray --ray.address={cluster.address}, env=cluster.env ...

Each node is a ``ray start --block`` process in its own process group (a head first, then
the others joining it), so stopping it stops that node's raylet and workers, and only
them: never ``ray stop``, which would take down every Ray cluster of the user on the
machine. No dashboard, no usage stats. Leave ``driver()`` before the cluster: it shuts
Serve down. The cluster has its own auth token (Ray's token
authentication, in ``env``): pass ``env`` to every process that joins it; ``driver()``
joins this process too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalCluster:
    address: str
    env: dict[str, str]  # for every process joining the cluster (auth token, voicepipe path)
    nodes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @contextlib.contextmanager
    def driver(self) -> Iterator[None]:
        """This process joins the cluster as a Ray driver, with the cluster's env."""
        import ray

        keys = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")
        saved = {k: os.environ.get(k) for k in keys}
        os.environ.update({k: self.env[k] for k in keys})
        _reload_auth()
        try:
            ray.init(address=self.address, logging_level=logging.WARNING, log_to_driver=False)
            yield
        finally:
            # The cluster is going: Serve first, or HAProxy, which Serve runs as a child of
            # a worker, outlives its node.
            with contextlib.suppress(Exception):
                from ray import serve

                serve.shutdown()
            ray.shutdown()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            _reload_auth()


def _reload_auth() -> None:
    """Ray reads the auth mode and token once per process and caches them: after the
    environment changed, they are read again (as Ray's own test helpers do)."""
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, wait_s: float = 60) -> None:
    """Signal ``proc``'s process group, wait (then SIGKILL it)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def local_cluster(cpus: list[int]) -> Iterator[LocalCluster]:
    """A head with ``cpus[0]`` CPUs and one more node per further entry."""
    temp = tempfile.mkdtemp(prefix="vpray", dir="/tmp")  # short: Ray's socket paths
    gcs = free_port()
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        # Serve's HAProxy ingress: its stats and metrics ports, free ones (not 8404, 9101)
        "RAY_SERVE_HAPROXY_STATS_PORT": str(free_port()),
        "RAY_SERVE_HAPROXY_METRICS_PORT": str(free_port()),
    }
    cluster = LocalCluster(f"127.0.0.1:{gcs}", env)
    common = ["--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1"]
    logs = open(Path(temp) / "nodes.log", "wb")
    try:
        for i, n in enumerate(cpus):
            if i == 0:
                cmd = [RAY, "start", "--head", f"--port={gcs}", "--include-dashboard=false"]
                cmd += [f"--temp-dir={temp}"]
            else:
                cmd = [RAY, "start", f"--address={cluster.address}"]
            cmd += [f"--num-cpus={n}", *common]
            proc = subprocess.Popen(cmd, env=env, stdout=logs, stderr=logs, start_new_session=True)
            cluster.nodes.append(proc)
            if i == 0:
                _wait_for_port(gcs, proc, temp)
        _wait_for_nodes(cluster, len(cpus), temp)
        yield cluster
    finally:
        for proc in reversed(cluster.nodes):
            stop(proc)
        logs.close()
        shutil.rmtree(temp, ignore_errors=True)


def _log_tail(temp: str) -> str:
    with contextlib.suppress(OSError):
        return (Path(temp) / "nodes.log").read_text(errors="replace")[-2000:]
    return ""


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], temp: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the Ray head did not start:\n{_log_tail(temp)}")
        time.sleep(0.3)


def _wait_for_nodes(cluster: LocalCluster, n: int, temp: str) -> None:
    """Until ``n`` nodes are alive (asked by ``ray status``-like polling from a driver)."""
    code = (
        "import ray, time\n"
        f"ray.init(address={cluster.address!r}, logging_level='ERROR')\n"
        f"deadline = time.monotonic() + {START_TIMEOUT_S}\n"
        f"while len([x for x in ray.nodes() if x['Alive']]) < {n}:\n"
        "    assert time.monotonic() < deadline\n"
        "    time.sleep(0.5)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=cluster.env, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"{n} Ray nodes never came up:\n{done.stderr.decode()[-2000:]}\n{_log_tail(temp)}"
        )
