"""A fault-injecting TCP proxy for loopback tests: delay, jitter and stalls.

This machine's kernel has no netem, so faults are made in user space. Each
direction of each connection gets its own seeded ``FaultSchedule``
(``voicepipe.core.playout.faults``): every chunk read is written on after its own random
delay, never before the chunk ahead of it, and nothing passes during the
periodic stalls. That is what TCP shows a WebSocket: uneven but ordered delay,
and head-of-line blocking after a loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from voicepipe.clock import now_ns
from voicepipe.core.playout.faults import FaultSchedule, FaultSpec

log = logging.getLogger(__name__)
CHUNK = 65536


@dataclass
class DirectionStats:
    chunks: int = 0
    bytes: int = 0
    held_ns: int = 0  # sum over chunks of the time each was held back
    max_held_ns: int = 0
    # how much later than its schedule a chunk went out: the proxy's own event-loop lag,
    # i.e. the machine's scheduling noise on top of the injected faults
    max_late_ns: int = 0


@dataclass
class NetSimStats:
    connections: int = 0
    up: DirectionStats = field(default_factory=DirectionStats)  # client → server
    down: DirectionStats = field(default_factory=DirectionStats)  # server → client

    def as_dict(self) -> dict[str, object]:
        return {"connections": self.connections, "up": vars(self.up), "down": vars(self.down)}


def parse_hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)


class NetSim:
    """``await start()``, then connect to ``(host, port)``; ``await close()`` to stop."""

    def __init__(
        self,
        listen: tuple[str, int],
        upstream: tuple[str, int],
        spec: FaultSpec,
        directions: str = "both",
    ) -> None:
        if directions not in ("both", "up", "down"):
            raise ValueError(f"directions must be both, up or down, got {directions!r}")
        self.listen = listen
        self.upstream = upstream
        self.spec = spec
        self.directions = directions
        self.stats = NetSimStats()
        self.conn_starts: list[int] = []  # when each connection's fault schedules began
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._handle, *self.listen)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.listen = (host, port)
        return host, port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        idx = self.stats.connections
        self.stats.connections += 1
        try:
            try:
                s_reader, s_writer = await asyncio.open_connection(*self.upstream)
            except OSError as e:
                log.warning("netsim: upstream %s:%d unreachable: %s", *self.upstream, e)
                c_writer.close()
                return
            start = now_ns()
            self.conn_starts.append(start)
            specs = {}
            for k, name in enumerate(("up", "down")):
                on = self.directions in ("both", name)
                specs[name] = (
                    FaultSpec(
                        self.spec.delay_ms,
                        self.spec.jitter_ms,
                        self.spec.stall_ms,
                        self.spec.stall_every_s,
                        self.spec.seed + 2 * idx + k,
                    )
                    if on
                    else FaultSpec()
                )
            await asyncio.gather(
                self._pump(c_reader, s_writer, FaultSchedule(specs["up"], start), self.stats.up),
                self._pump(
                    s_reader, c_writer, FaultSchedule(specs["down"], start), self.stats.down
                ),
            )
        finally:
            self._tasks.discard(task)
            c_writer.close()

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        sched: FaultSchedule,
        stats: DirectionStats,
    ) -> None:
        queue: asyncio.Queue[tuple[int, int, bytes] | None] = asyncio.Queue()

        async def read() -> None:
            try:
                while data := await reader.read(CHUNK):
                    t = now_ns()
                    queue.put_nowait((t, sched.release_ns(t), data))
            except (ConnectionError, OSError):
                pass
            finally:
                queue.put_nowait(None)

        reading = asyncio.create_task(read())
        try:
            while (item := await queue.get()) is not None:
                arrived, release, data = item
                wait = release - now_ns()
                if wait > 0:
                    await asyncio.sleep(wait / 1e9)
                held = now_ns() - arrived
                stats.max_late_ns = max(stats.max_late_ns, now_ns() - release)
                stats.chunks += 1
                stats.bytes += len(data)
                stats.held_ns += held
                stats.max_held_ns = max(stats.max_held_ns, held)
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (ConnectionError, OSError):
            pass
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
            writer.close()
