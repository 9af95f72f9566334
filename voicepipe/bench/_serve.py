"""Start `voicepipe serve` in its own process for benchmarks.

Benchmarks drive the server from a separate process, as in real use: the
server's work must not delay the client's event loop, whose arrival and
playout times are what is measured.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from voicepipe.config import Config, apply_overrides, dump_toml


@dataclass
class ServeProcess:
    proc: asyncio.subprocess.Process
    host: str
    port: int

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}/ws"

    def cpu_s(self) -> float:
        """User + system CPU seconds the server process has used so far (Linux /proc)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        """The server's resident set size (Linux /proc), MiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmRSS for pid {self.proc.pid}")

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


@asynccontextmanager
async def serve_process(
    pipeline: str,
    cfg: Config | None = None,
    *,
    trace: str | None = None,
    start_timeout_s: float = 300.0,
    port: int = 0,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    stop_timeout_s: float = 10.0,
) -> AsyncIterator[ServeProcess]:
    """``async with serve_process("assistant", cfg) as srv: …`` on 127.0.0.1, a free port
    (or ``port``; ``extra_args`` such as ``--ray``, in ``env`` instead of this one's)."""
    cfg_file = None
    args = [
        sys.executable,
        "-m",
        "voicepipe.cli",
        "serve",
        "--pipeline",
        pipeline,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra_args,
    ]
    if trace:
        args += ["--trace", trace]
    if cfg is not None:
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(dump_toml(cfg))
            cfg_file = f.name
        args += ["--config", cfg_file]
    proc = await asyncio.create_subprocess_exec(
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        # Model preloading happens before the URL line; the first line may take a while.
        line = (await asyncio.wait_for(proc.stdout.readline(), start_timeout_s)).decode()
        m = re.search(r"serving http://([\d.]+):(\d+)/", line)
        if not m:
            raise RuntimeError(f"voicepipe serve did not start (printed {line!r})")
        yield ServeProcess(proc, m.group(1), int(m.group(2)))
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), stop_timeout_s)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
        if cfg_file:
            os.unlink(cfg_file)


def parse_variants(flags: list[str], base: Config) -> dict[str, list[str]]:
    """``--variant KEY=V[,KEY=V]`` flags: {flag: its overrides} (an empty value is one:
    ``turns.p_end_model=``), each applied to ``base`` now, so a bad key or value fails
    before any server starts."""
    variants = {v: [x for x in v.split(",") if x] for v in flags}
    for overrides in variants.values():
        apply_overrides(base, overrides)
    return variants


@asynccontextmanager
async def serve_variants(
    pipeline: str, cfg: Config, variants: dict[str, list[str]], trace: str | None = None
) -> AsyncIterator[dict[str, ServeProcess]]:
    """One server per variant (its overrides on top of ``cfg``), all up at once, so the
    benches can play each situation to every variant in turn under the same load;
    ``trace``: the last variant's spans."""
    names = list(variants)
    async with AsyncExitStack() as stack:
        servers = {}
        for name in names:
            vcfg = apply_overrides(cfg, variants[name])
            tr = trace if name == names[-1] else None
            servers[name] = await stack.enter_async_context(serve_process(pipeline, vcfg, trace=tr))
        yield servers
