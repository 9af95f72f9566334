"""Server-level fuzzing: random, truncated, oversized and out-of-order WebSocket messages
and HTTP requests against a real server on loopback, while honest sessions run.

``core/wire/protocol.py`` is fuzzed on its own in tests/core; this drives the whole
server (handshake, admission, session, pipeline) through real sockets. Every
connection the server closes must carry a documented close code and a reason;
the server must stay up, honest sessions meanwhile must get their audio back
sample for sample, and afterwards no connection, admission slot or task may be
left behind.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from voicepipe import config
from voicepipe.client import run_sessions
from voicepipe.core.wire import protocol as P
from voicepipe.server.app import Server

MAX_BYTES = 16 * 1024
RATE = 16000
DOCUMENTED = {1000, 1001, 1002, 1007, 1008, 1009, 1011, 1013, 4001, 4003, 4008, 4015}
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


class Running:
    """A server on its own event loop in a thread, so hypothesis can drive it synchronously."""

    def __init__(self) -> None:
        cfg = config.Config()
        cfg = dataclasses.replace(
            cfg,
            server=dataclasses.replace(
                cfg.server, max_message_bytes=MAX_BYTES, hello_timeout_s=2.0, idle_timeout_s=5.0
            ),
        )
        self.cfg = cfg
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = Server(cfg, pipeline="loopback", port=0)
        self.call(self.server.start())
        self.baseline = self.call(self._tasks())

    def call(self, coro: object, timeout: float = 60) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _tasks(self) -> set[asyncio.Task]:
        return {t for t in asyncio.all_tasks() if not t.done()}

    def stop(self) -> None:
        self.call(self.server.close(drain_s=0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def running() -> Iterator[Running]:
    r = Running()
    yield r
    r.stop()


def _audio(seq: int, n: int = 320) -> bytes:
    pcm = (800 * np.sin(np.arange(n) / 4)).astype(np.int16)
    return P.encode_audio(P.AudioFrame(kind=P.KIND_AUDIO_IN, seq=seq, media_ts=seq * n, pcm=pcm))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def _message(draw: st.DrawFn) -> tuple[str, object]:
    kind = draw(
        st.sampled_from(
            ["hello", "json", "text", "binary", "audio", "huge", "truncated", "not_utf8", "end"]
        )
    )
    if kind == "hello":
        rate = draw(st.sampled_from([RATE, 48000, 7999, 0]))
        return kind, P.encode_message(P.Hello(sample_rate=rate))
    if kind == "json":
        typ = draw(st.sampled_from(sorted(P.MESSAGE_TYPES)))
        fields = list(P.MESSAGE_TYPES[typ].__dataclass_fields__)
        keys = draw(st.lists(st.sampled_from(fields), unique=True)) if fields else []
        obj = {k: draw(_json_values) for k in keys}
        obj["type"] = typ
        return kind, json.dumps(obj)
    if kind == "text":
        return kind, draw(st.text(max_size=200))
    if kind == "binary":
        return kind, draw(st.binary(max_size=100))
    if kind == "audio":
        return kind, _audio(draw(st.integers(0, 50)))
    if kind == "huge":
        return kind, bytes(MAX_BYTES + draw(st.integers(1, 4096)))
    if kind == "truncated":
        return kind, _audio(1)[: draw(st.integers(0, 25))]
    if kind == "not_utf8":
        return kind, b"\xff" + draw(st.binary(max_size=20))
    return kind, P.encode_message(P.EndInput())


async def _drive(url: str, messages: list[tuple[str, object]]) -> tuple[int, str] | None:
    """Send the messages; the server's close (code, reason), or None if it kept it open."""
    ws = await connect(url, compression=None, proxy=None, close_timeout=2, max_size=None)
    try:
        for kind, data in messages:
            if kind == "not_utf8":  # a raw masked text frame the client library won't send
                mask = b"\x01\x02\x03\x04"
                body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
                ws.transport.write(bytes([0x81, 0x80 | len(data)]) + mask + body)
            else:
                await ws.send(data)
        await ws.send(P.encode_message(P.EndInput()))
        async with asyncio.timeout(8):
            async for _ in ws:
                pass
    except (ConnectionClosed, TimeoutError):
        pass
    finally:
        if ws.protocol.close_rcvd is None:
            await ws.close()
    rcvd = ws.protocol.close_rcvd
    if rcvd is None or not ws.protocol.close_rcvd_then_sent:
        return None
    return rcvd.code, rcvd.reason


def _http(port: int, raw: bytes, half_close: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        s.sendall(raw)
        if half_close:
            s.shutdown(socket.SHUT_WR)  # a truncated request ends here
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


_paths = st.one_of(
    st.sampled_from(
        [
            "/",
            "/ws",
            "/healthz",
            "/metrics",
            "/index.html",
            "/../etc/passwd",
            "/%2e%2e/%2e%2e/etc/passwd",
            "//",
            "/?a=b",
            "/web/../../x",
            "/v1/chat/completions",
            "/v1/models",
            "/v1/models/../../etc/passwd",
        ]
    ),
    st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=60).map(
        lambda t: "/" + t
    ),
)


@st.composite
def _request(draw: st.DrawFn) -> bytes:
    method = draw(st.sampled_from(["GET", "POST", "HEAD", "PUT", "BREW", "get", ""]))
    path = draw(_paths)
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2", "", "HTTP/1.1 x"]))
    headers = draw(
        st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "Host",
                        "Origin",
                        "Upgrade",
                        "Connection",
                        "Sec-WebSocket-Key",
                        "Sec-WebSocket-Version",
                        "Content-Length",
                        "X-" + "a" * 10,
                    ]
                ),
                st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
            ),
            max_size=6,
        )
    )
    lines = [f"{method} {path} {version}".encode()]
    lines += [f"{k}: {v}".encode() for k, v in headers]
    raw = b"\r\n".join(lines) + b"\r\n\r\n"
    cut = draw(st.one_of(st.none(), st.integers(0, len(raw))))
    junk = draw(st.binary(max_size=30))
    return (raw[:cut] if cut is not None else raw) + junk


def test_fuzzed_clients_never_hurt_the_server_or_an_honest_session(running: Running) -> None:
    server = running.server
    url = server.ws_url
    honest_results: list = []
    stop_honest = threading.Event()
    t = np.arange(RATE) / RATE
    pcm = (0.3 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)

    async def honest_loop() -> None:
        while not stop_honest.is_set():
            (res,) = await run_sessions(
                url, pcm, RATE, running.cfg, output_sample_rate=RATE, trailing_silence_s=0.1
            )
            honest_results.append(res)

    honest = asyncio.run_coroutine_threadsafe(honest_loop(), running.loop)
    closes: list[tuple[int, str]] = []

    @FUZZ
    @given(st.lists(_message(), min_size=0, max_size=6))
    def fuzz_ws(messages: list[tuple[str, object]]) -> None:
        try:
            closed = asyncio.run(_drive(url, messages))
        except (InvalidHandshake, OSError) as e:  # never expected: the upgrade is plain
            raise AssertionError(f"handshake failed: {e!r}") from e
        if closed is not None:
            code, reason = closed
            assert code in DOCUMENTED, closed
            assert reason or code == 1000, closed
            closes.append(closed)

    @FUZZ
    @given(_request())
    def fuzz_http(raw: bytes) -> None:
        out = _http(server.port, raw)
        # An answer is HTTP (a status line) or nothing (the server hung up on garbage).
        assert out == b"" or out.startswith(b"HTTP/1.1 "), out[:80]
        assert b"root:" not in out  # nothing outside web/ is ever served

    try:
        fuzz_ws()
        fuzz_http()
    finally:
        stop_honest.set()
        honest.result(120)

    # The fuzz did reach the server's refusals, not just its happy path.
    assert {c for c, _ in closes} >= {1002, 1009}, closes
    # The server is up and every honest session got its audio back exactly.
    assert honest_results
    sent = P.pcm16_from_float(pcm)
    for res in honest_results:
        out = res.to_json()
        assert out["ok"] and out["close_code"] == 1000, out
        np.testing.assert_array_equal(res.reply_audio()[: len(sent)], sent)
    status = _http(
        server.port,
        f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode(),
        half_close=False,
    )
    assert status.startswith(b"HTTP/1.1 200")

    async def settled() -> tuple[int, int, int, list[str]]:
        for _ in range(200):
            if not server.sessions:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)
        extra = [
            t.get_name()
            for t in asyncio.all_tasks()
            if not t.done() and t not in running.baseline and t is not asyncio.current_task()
        ]
        return len(server.sessions), server.admission.sessions, server.admission.pending, extra

    open_conns, sessions, pending, leaked = running.call(settled())
    assert (open_conns, sessions, pending) == (0, 0, 0)
    assert leaked == [], leaked
