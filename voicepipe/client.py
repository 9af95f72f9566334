"""Headless WebSocket client (and load driver): stream a WAV, play the replies, measure.

One session: hello → stream the WAV in 20 ms frames at real time × ``speed``
→ ~1 s of trailing silence (so endpointing can fire) → ``end`` → play until
every reply has been heard. A virtual speaker pulls the playout buffer at
real time, exactly like the browser's AudioWorklet would, so what the client
reports as "played" is what a listener would have heard, when.

The playout seam (``Playout`` below) is the interface of
``voicepipe.core.playout.jitter.JitterBuffer``: ``push`` each reply frame as it
arrives, ``pull(n, now_ns)`` the next n int16 samples, ``stats()`` for the
counters and ``playouts[turn]`` (``first_play_ns``, ``played_samples``,
``done``) for what was heard when. ``make_playout`` picks an implementation
by name: ``adaptive`` (the NetEq-style buffer) or ``fifo`` (a fixed start
delay, no time-scaling; the reference it is measured against).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Origin

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.playout.room import EchoPath
from voicepipe.core.wire import protocol as P
from voicepipe.core.wire.session_rules import ClientRules
from voicepipe.tracing import E2E_VOICE_TO_VOICE, SpanRecord, Tracer

# ---------------------------------------------------------------- playout seam


@dataclass
class ReplyPlayout:
    """What the listener got of one reply (same fields as core.jitter.ReplyPlayout)."""

    first_play_ns: int | None = None
    played_samples: int = 0
    done: bool = False


class Playout(Protocol):
    playouts: dict[int, Any]  # turn_id → object with first_play_ns, played_samples, done

    def push(
        self,
        seq: int,
        media_ts: int,
        pcm: np.ndarray,
        now_ns: int,
        reply: int = 0,
        last: bool = False,
    ) -> None: ...
    def end_reply(self, reply: int) -> None: ...
    def clear(self, upto_reply: int | None = None) -> None: ...
    def pull(self, n: int, now_ns: int) -> np.ndarray: ...
    def stats(self, now_ns: int | None = None) -> dict[str, float | int]: ...


class FifoPlayout:
    """Plays replies in order after a fixed start delay; a dry buffer plays silence.

    No adaptation, no time-scaling: the baseline the adaptive buffer must beat.
    """

    def __init__(self, sample_rate: int, start_ms: int = 40) -> None:
        self.rate = sample_rate
        self.start = sample_rate * start_ms // 1000
        self.queue: deque[tuple[int, np.ndarray]] = deque()  # (turn, int16 pcm)
        self.playouts: dict[int, ReplyPlayout] = {}
        self.ended: set[int] = set()
        self.cleared_upto = -1
        self.cur: int | None = None  # turn being played
        self.dry = False
        self.c = dict(underruns=0, concealed=0, played=0, late=0)

    def push(
        self,
        seq: int,
        media_ts: int,
        pcm: np.ndarray,
        now_ns: int,
        reply: int = 0,
        last: bool = False,
    ) -> None:
        if reply <= self.cleared_upto:
            self.c["late"] += 1
            return
        self.playouts.setdefault(reply, ReplyPlayout())
        if len(pcm):
            self.queue.append((reply, np.asarray(pcm, dtype=np.int16)))
        if last:
            self.end_reply(reply)

    def end_reply(self, reply: int) -> None:
        self.ended.add(reply)
        self.playouts.setdefault(reply, ReplyPlayout())

    def clear(self, upto_reply: int | None = None) -> None:
        keep = lambda t: upto_reply is not None and t > upto_reply  # noqa: E731
        self.queue = deque(item for item in self.queue if keep(item[0]))
        for t, pl in self.playouts.items():
            if not keep(t):
                pl.done = True
        self.cleared_upto = max(
            self.cleared_upto,
            upto_reply if upto_reply is not None else max(self.playouts, default=-1),
        )
        if self.cur is not None and not keep(self.cur):
            self.cur = None

    def _buffered(self, turn: int) -> int:
        return sum(len(p) for t, p in self.queue if t == turn)

    def pull(self, n: int, now_ns: int) -> np.ndarray:
        out = np.zeros(n, dtype=np.int16)
        k = 0
        while k < n:
            if self.cur is None:
                if not self.queue:
                    break
                turn = self.queue[0][0]
                if self._buffered(turn) < self.start and turn not in self.ended:
                    break  # still filling the start delay
                self.cur = turn
            if not self.queue or self.queue[0][0] != self.cur:
                if self.cur in self.ended:  # reply over: next one (after its own start delay)
                    self.playouts[self.cur].done = True
                    self.cur = None
                    continue
                if not self.dry:
                    self.c["underruns"] += 1
                    self.dry = True
                self.c["concealed"] += n - k
                break
            self.dry = False
            turn, pcm = self.queue[0]
            take = min(n - k, len(pcm))
            out[k : k + take] = pcm[:take]
            pl = self.playouts[turn]
            if pl.first_play_ns is None:
                pl.first_play_ns = now_ns + k * 1_000_000_000 // self.rate
            pl.played_samples += take
            self.c["played"] += take
            if take == len(pcm):
                self.queue.popleft()
            else:
                self.queue[0] = (turn, pcm[take:])
            k += take
        return out

    def stats(self, now_ns: int | None = None) -> dict[str, float | int]:
        ms = 1000 / self.rate
        return {
            "underruns": self.c["underruns"],
            "concealed_ms": self.c["concealed"] * ms,
            "accelerated_ms": 0.0,
            "stretched_ms": 0.0,
            "played_ms": self.c["played"] * ms,
            "current_delay_ms": sum(len(p) for _, p in self.queue) * ms,
            "target_delay_ms": self.start * ms,
            "late_frames": self.c["late"],
        }


def make_playout(name: str, cfg: Config, sample_rate: int) -> Playout:
    if name == "fifo":
        return FifoPlayout(sample_rate, cfg.audio.frame_ms + cfg.jitter.start_margin_ms)
    if name == "adaptive":
        from voicepipe.core.playout.jitter import JitterBuffer, JitterParams

        return JitterBuffer(JitterParams.from_config(cfg.jitter, sample_rate, cfg.audio.frame_ms))
    raise ValueError(f"unknown playout {name!r} (fifo | adaptive)")


# ---------------------------------------------------------------- one session

# Closes after which a new connection may find a healthy server: the server or replica
# went away (1001 draining, 1012 replica lost: docs/PROTOCOL.md), or the connection dropped
# with no close frame at all (1006).
RECONNECT_CODES = frozenset({P.CLOSE_GOING_AWAY, 1006, P.CLOSE_REPLICA_LOST})
# With an echo path, the mic stays open this long after the last reply played to the end.
LISTEN_AFTER_S = 2.0
RECONNECT_BACKOFF_S = 0.5  # times the number of reconnects so far
REPORT_EVERY = 10  # speaker blocks (10 ms) between playback reports while a reply plays
# A 503 at the handshake (models still loading, a replica still starting: docs/PROTOCOL.md)
# is tried again after the server's Retry-After, or with exponential backoff from
# UNAVAILABLE_BACKOFF_S up to UNAVAILABLE_MAX_BACKOFF_S, for ``unavailable_wait_s`` in all.
UNAVAILABLE_BACKOFF_S = 0.25
UNAVAILABLE_MAX_BACKOFF_S = 4.0


@dataclass
class TurnResult:
    turn_id: int
    transcript: str = ""
    speech_end_ms: float | None = None  # input media time of the end of speech
    reply_text: str = ""
    interrupted: bool = False
    frames: dict[int, np.ndarray] = field(default_factory=dict)  # media_ts → int16
    first_audio_ns: int | None = None  # arrival of the reply's first audio frame
    latency_ms: dict[str, float] = field(default_factory=dict)
    played_samples: int = 0  # of the reply, by the virtual speaker
    last_play_ns: int | None = None  # end of the last 10 ms block that played some of it

    def audio(self) -> np.ndarray:
        if not self.frames:
            return np.zeros(0, np.int16)
        return np.concatenate([self.frames[k] for k in sorted(self.frames)])


@dataclass
class SessionResult:
    index: int = 0
    session_id: str = ""
    output_sample_rate: int = 0
    close_code: int | None = None
    close_reason: str = ""
    error: str = ""
    done: bool = False  # the server answered "end" with "done"
    turns: dict[int, TurnResult] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)  # "alert" messages (timers)
    spans: list[SpanRecord] = field(default_factory=list)
    jitter: dict[str, float | int] = field(default_factory=dict)
    input_audio_s: float = 0.0
    first_send_ns: int | None = None
    first_play_ns: int | None = None
    # Sessions lost before this one (``ClientSession.reconnect``): session_id, close_code,
    # close_reason, at_ns (when the client saw the close).
    reconnects: list[dict[str, Any]] = field(default_factory=list)
    unavailable: int = 0  # handshakes answered 503 (and tried again) before this session
    barge_in_ns: int | None = None  # when the barge-in's first sample was captured (sent)
    interrupts: list[tuple[int, int]] = field(default_factory=list)  # (turn, arrival ns)

    def turn(self, t: int) -> TurnResult:
        return self.turns.setdefault(t, TurnResult(t))

    def reply_audio(self) -> np.ndarray:
        """Every reply's received samples (int16), replies in turn order."""
        parts = [self.turns[t].audio() for t in sorted(self.turns)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int16)

    def to_json(self) -> dict[str, Any]:
        rate = self.output_sample_rate or 1
        latency: dict[str, list[float]] = {}
        for t in sorted(self.turns):
            for k, v in self.turns[t].latency_ms.items():
                latency.setdefault(k, []).append(v)
        return {
            "session": self.index,
            "session_id": self.session_id,
            "ok": self.done and not self.error,
            "transcript": " ".join(
                x.transcript for _, x in sorted(self.turns.items()) if x.transcript
            ).strip(),
            "reply_text": " ".join(
                x.reply_text.strip() for _, x in sorted(self.turns.items()) if x.reply_text.strip()
            ),
            "reply_audio_s": len(self.reply_audio()) / rate,
            "input_audio_s": self.input_audio_s,
            # mean over turns when there are several; per turn below
            "latency_ms": {k: float(np.mean(v)) for k, v in latency.items()},
            "jitter": self.jitter,
            "turns": [
                {
                    "turn_id": t,
                    "transcript": x.transcript,
                    "reply_text": x.reply_text,
                    "reply_audio_s": len(x.audio()) / rate,
                    "interrupted": x.interrupted,
                    "latency_ms": x.latency_ms,
                }
                for t, x in sorted(self.turns.items())
            ],
            "errors": self.errors,
            "close_code": self.close_code,
            "close_reason": self.close_reason,
            "error": self.error,
            "reconnects": [{k: v for k, v in r.items() if k != "at_ns"} for r in self.reconnects],
            "unavailable": self.unavailable,
        }


def _retry_after_s(value: str | None) -> float:
    """Retry-After in seconds (RFC 9110 delay-seconds), capped; -1 when absent or an
    HTTP date (then the client's own backoff decides)."""
    try:
        return min(max(0.0, float(value or "")), UNAVAILABLE_MAX_BACKOFF_S)
    except ValueError:
        return -1.0


class ClientSession:
    """Stream ``pcm`` (float32 mono at ``sample_rate``) to ``url`` and collect the replies."""

    def __init__(
        self,
        url: str,
        pcm: np.ndarray,
        sample_rate: int,
        cfg: Config,
        *,
        speed: float = 1.0,
        output_sample_rate: int = 0,
        token: str = "",
        playout: str = "adaptive",
        trailing_silence_s: float = 1.0,
        timeout_s: float = 60.0,
        index: int = 0,
        origin: str | None = None,
        barge_in: np.ndarray | None = None,
        barge_in_after_s: float = 1.0,
        reconnect: int = 0,
        unavailable_wait_s: float = 60.0,
        echo: EchoPath | None = None,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.url, self.cfg, self.speed, self.token = url, cfg, speed, token
        self.rate = sample_rate
        tail = np.zeros(round(trailing_silence_s * sample_rate), np.float32)
        self.pcm = np.concatenate([np.asarray(pcm, np.float32).reshape(-1), tail])
        self.out_rate = output_sample_rate
        self.playout_name = playout
        self.playout: Playout | None = None
        self.timeout_s = timeout_s
        self.origin = origin
        self.res = SessionResult(index=index, input_audio_s=len(pcm) / sample_rate)
        # Barge-in: once a reply has played this long, speak ``barge_in`` over it.
        self.barge_in = (
            None
            if barge_in is None
            else np.concatenate([np.asarray(barge_in, np.float32).reshape(-1), tail])
        )
        self.barge_in_after_s = barge_in_after_s
        self.reconnect = reconnect
        self.unavailable_wait_s = unavailable_wait_s
        # A speakerphone: what the virtual speaker plays comes back into the mic (mixed into
        # every frame sent), and the mic stays open until the replies have played.
        self.echo = echo
        self._received_all = asyncio.Event()
        self.rules = ClientRules()  # what the server may send when (core/wire/session_rules.py)

    async def run(self) -> SessionResult:
        """The session; when it is lost before ``done`` (its server or replica went away:
        ``RECONNECT_CODES``), a new one on a new connection, at most ``reconnect`` times.
        The new session starts the input again (the lost one's conversation went with its
        server); ``res.reconnects`` says what was lost, ``res`` the session that ended."""
        while True:
            await self._connect()
            res = self.res
            lost = not res.done and res.close_code in RECONNECT_CODES
            if not lost or len(res.reconnects) >= self.reconnect:
                break
            self._reset()
            await asyncio.sleep(RECONNECT_BACKOFF_S * len(self.res.reconnects))
        if not res.error and not res.done:
            res.error = f"closed before done: {res.close_code} {res.close_reason}".strip()
        self._finish()
        return res

    def _reset(self) -> None:
        """A fresh result and playout for the next connection; the lost one is recorded."""
        old = self.res
        lost = {"session_id": old.session_id, "close_code": old.close_code}
        lost |= {"close_reason": old.close_reason, "at_ns": now_ns()}
        self.res = SessionResult(index=old.index, input_audio_s=old.input_audio_s)
        self.res.reconnects = [*old.reconnects, lost]
        self.playout = None
        self.rules = ClientRules()
        self._received_all = asyncio.Event()

    async def _connect(self) -> None:
        """One session on one connection; a 503 handshake (not ready yet) is retried with
        backoff, at most ``unavailable_wait_s`` in all (then the 503 is the error)."""
        deadline = asyncio.get_running_loop().time() + self.unavailable_wait_s
        backoff = UNAVAILABLE_BACKOFF_S
        while True:
            retry_after = await self._connect_once()
            if retry_after is None:
                return
            wait = min(backoff, UNAVAILABLE_MAX_BACKOFF_S) if retry_after < 0 else retry_after
            if asyncio.get_running_loop().time() + wait > deadline:
                return  # res.error says "handshake refused: HTTP 503"
            self.res.unavailable += 1
            self.res.error = ""
            await asyncio.sleep(wait)
            backoff *= 2

    async def _connect_once(self) -> float | None:
        """None when done; else the 503's Retry-After in seconds (-1: none given)."""
        res = self.res
        origin = Origin(self.origin) if self.origin else None
        try:
            async with connect(
                self.url,
                origin=origin,
                compression=None,
                proxy=None,
                max_size=None,
                open_timeout=10,
                close_timeout=2,
            ) as ws:
                try:
                    await self._session(ws)
                finally:
                    await ws.close()
                    res.close_code, res.close_reason = ws.close_code, ws.close_reason or ""
        except InvalidStatus as e:
            res.error = f"handshake refused: HTTP {e.response.status_code}"
            if e.response.status_code == 503:
                return _retry_after_s(e.response.headers.get("Retry-After"))
        except (OSError, InvalidHandshake, asyncio.TimeoutError) as e:
            res.error = res.error or f"{type(e).__name__}: {e}"
        except P.ProtocolError as e:
            res.error = f"protocol error from server: {e.reason}"
        return None

    async def _session(self, ws: Any) -> None:
        hello = P.Hello(
            sample_rate=self.rate,
            output_sample_rate=self.out_rate,
            token=self.token,
            client="voicepipe-client",
        )
        await ws.send(P.encode_message(hello))
        try:
            ack = self.rules.receive(P.decode(await asyncio.wait_for(ws.recv(), self.timeout_s)))
        except ConnectionClosed:
            return  # refused: the close code says why
        if isinstance(ack, P.Error):  # refused (e.g. too_many_sessions): the close follows
            self.res.errors.append({"code": ack.code, "message": ack.message})
            with contextlib.suppress(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), self.timeout_s)
            return
        assert isinstance(ack, P.HelloAck)
        self.res.session_id, self.res.output_sample_rate = ack.session_id, ack.output_sample_rate
        if self.echo is not None and self.echo.out_rate != ack.output_sample_rate:
            raise ValueError(
                f"echo path built for {self.echo.out_rate} Hz, the server sends "
                f"{ack.output_sample_rate} Hz: ask for output_sample_rate={self.echo.out_rate}"
            )
        self.playout = make_playout(self.playout_name, self.cfg, ack.output_sample_rate)
        tasks = [
            asyncio.create_task(self._send(ws)),
            asyncio.create_task(self._recv(ws)),
            asyncio.create_task(self._speak(ws)),
        ]
        budget = len(self.pcm) / self.rate / self.speed + self.timeout_s
        try:
            await asyncio.wait_for(asyncio.gather(*tasks[1:]), budget)
        except asyncio.TimeoutError:
            self.res.error = f"timed out after {budget:.0f} s"
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _send(self, ws: Any) -> None:
        step = self.rate * self.cfg.audio.frame_ms // 1000
        t0 = self.res.first_send_ns = now_ns()
        sent = 0  # samples sent so far: the media timeline of the input
        seq = 0

        async def send(pcm: np.ndarray) -> None:
            nonlocal sent, seq
            for start in range(0, len(pcm), step):
                block = pcm[start : start + step]
                if self.echo is not None:
                    block = block + self.echo.take(len(block))
                chunk = P.pcm16_from_float(np.clip(block, -1.0, 1.0))
                # Like a microphone: a frame exists only once its last sample was captured.
                due = t0 + (sent + len(chunk)) * 1e9 / (self.rate * self.speed)
                if (wait := (due - now_ns()) / 1e9) > 0:
                    await asyncio.sleep(wait)
                await ws.send(
                    P.encode_audio(
                        P.AudioFrame(kind=P.KIND_AUDIO_IN, seq=seq, media_ts=sent, pcm=chunk)
                    )
                )
                sent += len(chunk)
                seq += 1

        with contextlib.suppress(ConnectionClosed):
            await send(self.pcm)
            if self.barge_in is not None:
                # Silence (a live mic) until a reply has played long enough, then talk over it.
                quiet = np.zeros(step, np.float32)
                give_up = now_ns() + int(self.timeout_s * 1e9)
                while not self._reply_played(self.barge_in_after_s) and now_ns() < give_up:
                    await send(quiet)
                self.res.barge_in_ns = round(t0 + sent * 1e9 / (self.rate * self.speed))
                await send(self.barge_in)
            if self.echo is not None:
                await self._listen(send, np.zeros(step, np.float32))
            await ws.send(P.encode_message(P.EndInput()))

    async def _listen(
        self, send: Callable[[np.ndarray], Awaitable[None]], quiet: np.ndarray
    ) -> None:
        """An open mic (silence plus the echo) until every reply has played to the end and
        nothing new began for ``LISTEN_AFTER_S``: a reply made of the assistant's own echo
        would begin in that time."""
        give_up = now_ns() + int(self.timeout_s * 1e9)
        quiet_since: int | None = None
        while now_ns() < give_up:
            pl = self.playout
            busy = pl is None or not pl.playouts or not all(r.done for r in pl.playouts.values())
            if busy:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now_ns()
            elif now_ns() - quiet_since > LISTEN_AFTER_S * 1e9:
                return
            await send(quiet)

    def _reply_played(self, seconds: float) -> bool:
        pl = self.playout
        rate = self.res.output_sample_rate
        return (
            pl is not None
            and rate > 0
            and any(r.played_samples >= seconds * rate for r in pl.playouts.values())
        )

    async def _recv(self, ws: Any) -> None:
        res, playout = self.res, self.playout
        assert playout is not None
        try:
            async for data in ws:
                msg = self.rules.receive(P.decode(data))
                t = getattr(msg, "turn_id", 0)
                if isinstance(msg, P.AudioFrame):
                    turn = res.turn(t)
                    turn.frames[msg.media_ts] = msg.pcm
                    turn.first_audio_ns = turn.first_audio_ns or now_ns()
                    playout.push(msg.seq, msg.media_ts, msg.pcm, now_ns(), reply=t, last=msg.last)
                elif isinstance(msg, P.ReplyStart):
                    res.turn(t)
                elif isinstance(msg, P.ReplyText):
                    res.turn(t).reply_text += msg.delta
                elif isinstance(msg, P.ReplyEndMsg):
                    turn = res.turn(t)
                    turn.reply_text = msg.text or turn.reply_text
                    turn.interrupted = msg.interrupted
                    playout.end_reply(t)
                elif isinstance(msg, P.Transcript) and msg.final:
                    res.turn(t).transcript = msg.text
                    res.turn(t).speech_end_ms = msg.speech_end_ms
                elif isinstance(msg, P.Span):
                    if msg.name == E2E_VOICE_TO_VOICE:
                        continue  # the server's estimate; we measure the whole span below
                    res.turn(t).latency_ms[msg.name] = msg.duration_ms
                    start = round(msg.start_ms * 1e6)
                    res.spans.append(
                        SpanRecord(
                            msg.name,
                            start,
                            start + round(msg.duration_ms * 1e6),
                            t,
                            res.session_id,
                            dict(msg.attrs),
                        )
                    )
                elif isinstance(msg, P.InterruptMsg):
                    playout.clear(upto_reply=msg.turn_id - 1)
                    res.interrupts.append((msg.turn_id, now_ns()))
                elif isinstance(msg, P.Error):
                    res.errors.append({"code": msg.code, "message": msg.message})
                elif isinstance(msg, P.AlertMsg):
                    res.alerts.append(
                        {"turn_id": t, "kind": msg.kind, "text": msg.text, "data": msg.data}
                    )
                elif isinstance(msg, P.Done):
                    res.done = True
        except ConnectionClosed:
            pass
        finally:
            self._received_all.set()

    async def _speak(self, ws: Any) -> None:
        """Virtual speaker: pull 10 ms blocks at real time; report what was played."""
        playout = self.playout
        assert playout is not None
        rate = self.res.output_sample_rate
        block = max(1, rate // 100)
        t0, k = now_ns(), 0
        reported: dict[int, tuple[bool, bool]] = {}
        grace_until: int | None = None
        progress: dict[int, int] = {}  # played_samples last reported, per reply
        while True:
            due = t0 + k * block * 1_000_000_000 // rate
            if (wait := (due - now_ns()) / 1e9) > 0:
                await asyncio.sleep(wait)
            else:
                await asyncio.sleep(0)  # behind schedule: catch up, but never starve the loop
            played = playout.pull(block, due)
            if self.echo is not None:
                # (int16 from the playout; the echo path, like the mic, works in float)
                self.echo.played(played.astype(np.float32) / 32768.0)
            k += 1
            for t, pl in list(playout.playouts.items()):
                turn = self.res.turn(t)
                if pl.played_samples > turn.played_samples:
                    turn.played_samples = pl.played_samples
                    turn.last_play_ns = due + block * 1_000_000_000 // rate
            for t, pl in list(playout.playouts.items()):
                state = (pl.first_play_ns is not None, bool(pl.done))
                # Also every REPORT_EVERY blocks while it plays: the server lines up its
                # echo canceller's reference with where the playout really is.
                moving = (
                    k % REPORT_EVERY == 0
                    and not state[1]
                    and pl.played_samples > progress.get(t, 0)
                )
                if (state != reported.get(t, (False, False)) or moving) and state[0]:
                    reported[t] = state
                    progress[t] = pl.played_samples
                    msg = P.Playback(
                        turn_id=t,
                        played_samples=pl.played_samples,
                        sample_rate=rate,
                        first_play_ms=pl.first_play_ns / 1e6,
                        now_ms=now_ns() / 1e6,
                        done=state[1],
                        counters=_floats(playout.stats(due)),
                    )
                    with contextlib.suppress(ConnectionClosed):
                        await ws.send(P.encode_message(msg))
            if self._received_all.is_set():
                if all(pl.done for pl in playout.playouts.values()):
                    return
                # Audio the server never finished (a cut reply) must not keep us forever.
                grace_until = grace_until or now_ns() + 5_000_000_000
                if now_ns() > grace_until:
                    return

    def _finish(self) -> None:
        res = self.res
        if self.playout is not None:
            res.jitter = dict(self.playout.stats())
            for t, pl in self.playout.playouts.items():
                first = pl.first_play_ns
                if first is None:
                    continue
                res.first_play_ns = min(first, res.first_play_ns or first)
                turn = res.turn(t)
                if turn.speech_end_ms is not None and res.first_send_ns is not None:
                    # when the client sent the last speech sample → when the reply was heard
                    end_ns = res.first_send_ns + round(turn.speech_end_ms * 1e6 / self.speed)
                    turn.latency_ms[E2E_VOICE_TO_VOICE] = (first - end_ns) / 1e6
                    lead = lead_silence_ms(turn.audio(), res.output_sample_rate)
                    if lead is not None:  # the first word, heard after the reply's lead-in
                        turn.latency_ms[VOICE_TO_SPEECH] = (first - end_ns) / 1e6 + lead
                    if turn.first_audio_ns is not None:  # before the playout buffer
                        arrived = (turn.first_audio_ns - end_ns) / 1e6
                        turn.latency_ms[VOICE_TO_FIRST_AUDIO] = arrived
                    res.spans.append(
                        SpanRecord(
                            E2E_VOICE_TO_VOICE,
                            end_ns,
                            first,
                            t,
                            res.session_id,
                            {"measured_by": "client"},
                        )
                    )
        if res.first_play_ns is not None and res.first_send_ns is not None and res.turns:
            first_turn = res.turns[min(res.turns)]
            first_turn.latency_ms["client.first_audio"] = (
                res.first_play_ns - res.first_send_ns
            ) / 1e6


# Last speech sample sent → first reply audio received: what any client gets before its
# own playout buffer (``bench e2e --endpoint both`` compares endpoints on it).
VOICE_TO_FIRST_AUDIO = "client.voice_to_first_audio"
# Last speech sample sent → the reply's first audible sample played: voice to voice plus
# the silence the reply's audio starts with (played at the playout's steady pace from its
# first sample). What a listener waits before the first word; equal to voice to voice
# only when the TTS starts speaking at its first sample.
VOICE_TO_SPEECH = "client.voice_to_speech"
AUDIBLE = 10 ** (-40 / 20) * 32768  # -40 dBFS in int16: above the codec's noise floor


def lead_silence_ms(pcm: np.ndarray, sample_rate: int) -> float | None:
    """How long ``pcm`` (int16) stays below -40 dBFS from its start, in ms; None when it
    never rises above it (or the rate is unknown)."""
    if sample_rate <= 0 or pcm.size == 0:
        return None
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > AUDIBLE)
    return None if loud.size == 0 else float(loud[0]) * 1000.0 / sample_rate


def _floats(d: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items() if isinstance(v, (int, float))}


async def run_sessions(
    url: str,
    pcm: np.ndarray,
    sample_rate: int,
    cfg: Config,
    *,
    concurrency: int = 1,
    tracer: Tracer | None = None,
    **kwargs: Any,
) -> list[SessionResult]:
    """``concurrency`` sessions with the same audio at once (the load driver)."""
    sessions = [
        ClientSession(url, pcm, sample_rate, cfg, index=i, **kwargs) for i in range(concurrency)
    ]
    results = await asyncio.gather(*(s.run() for s in sessions))
    if tracer is not None:
        for r in results:
            for span in r.spans:
                tracer.add(span)
    return list(results)
