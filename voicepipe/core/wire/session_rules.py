"""The wire protocol's session rules, sans-I/O: which message may come when, and deadlines.

``core/wire/protocol.py`` says what one message is; this says what a sequence of them
may be (docs/PROTOCOL.md, "Session life"), for each side:

- ``ServerRules``: what a server accepts from a client. Hello first and once;
  only client message types; audio of kind 1; after ``end`` only interrupts and
  playback reports matter (a page's microphone may still deliver a frame or two,
  which are dropped, not errors); a hello deadline, then an idle deadline.
- ``ClientRules``: what a client accepts from a server. ``hello_ack`` (or a fatal
  ``error``) first; only server message types; audio of kind 2; nothing after
  ``done`` but the close.

Both take the current time as an argument and never read a clock: the asyncio
shells (server/session.py, client.py) ask ``deadline_ns`` how long to wait and
turn a passed deadline into the error ``expired`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from voicepipe.core.wire import protocol as P

Incoming = P.Message | P.AudioFrame


class Phase(Enum):
    HELLO = "waiting for hello"  # server: no hello yet; client: no hello_ack yet
    OPEN = "open"
    INPUT_ENDED = "input ended"  # server: the client sent "end"
    DONE = "done"  # client: the server sent "done"


@dataclass(frozen=True)
class ServerLimits:
    hello_timeout_ns: int
    idle_timeout_ns: int
    token: str = ""
    max_output_sample_rate: int = P.MAX_SAMPLE_RATE


class ServerRules:
    def __init__(self, limits: ServerLimits, now_ns: int) -> None:
        self.limits = limits
        self.phase = Phase.HELLO
        self.opened_ns = now_ns
        self.last_ns = now_ns  # when the last message arrived
        self.hello: P.Hello | None = None

    def deadline_ns(self) -> int:
        if self.phase is Phase.HELLO:
            return self.opened_ns + self.limits.hello_timeout_ns
        return self.last_ns + self.limits.idle_timeout_ns

    def expired(self) -> P.ProtocolError:
        """The error for a deadline that passed (the caller closes with it)."""
        if self.phase is Phase.HELLO:
            secs = self.limits.hello_timeout_ns / 1e9
            return P.ProtocolError(f"no hello within {secs:g} s", P.CLOSE_IDLE_TIMEOUT)
        return P.ProtocolError("nothing received", P.CLOSE_IDLE_TIMEOUT)

    def receive(self, msg: Incoming, now_ns: int) -> Incoming | None:
        """Check ``msg`` against the rules: it back if the session should act on it,
        None if it is to be dropped; ``ProtocolError`` if it breaks them."""
        self.last_ns = now_ns
        if self.phase is Phase.HELLO:
            if not isinstance(msg, P.Hello):
                raise P.ProtocolError("the first message must be hello")
            P.check_hello(
                msg,
                token=self.limits.token,
                max_output_sample_rate=self.limits.max_output_sample_rate,
            )
            self.hello = msg
            self.phase = Phase.OPEN
            return msg
        if isinstance(msg, P.AudioFrame):
            if msg.kind != P.KIND_AUDIO_IN:
                raise P.ProtocolError("clients send audio kind 1 only")
            return msg if self.phase is Phase.OPEN else None
        if isinstance(msg, P.Hello):
            raise P.ProtocolError("second hello")
        if msg.TYPE not in P.CLIENT_TYPES:
            raise P.ProtocolError(f"{msg.TYPE} is a server message")
        if isinstance(msg, P.EndInput):
            if self.phase is Phase.INPUT_ENDED:
                return None
            self.phase = Phase.INPUT_ENDED
        return msg


class ClientRules:
    def __init__(self) -> None:
        self.phase = Phase.HELLO
        self.ack: P.HelloAck | None = None

    def receive(self, msg: Incoming) -> Incoming:
        """Check a server message; ``ProtocolError`` if the server broke the rules."""
        if self.phase is Phase.HELLO:
            if isinstance(msg, P.HelloAck):
                self.ack = msg
                self.phase = Phase.OPEN
                return msg
            if isinstance(msg, P.Error) and msg.fatal:
                return msg  # a refusal (e.g. too_many_sessions): the close follows
            raise P.ProtocolError(f"expected hello_ack, got {_name(msg)}")
        if self.phase is Phase.DONE:
            raise P.ProtocolError(f"{_name(msg)} after done")
        if isinstance(msg, P.AudioFrame):
            if msg.kind != P.KIND_AUDIO_OUT:
                raise P.ProtocolError("servers send audio kind 2 only")
            return msg
        if msg.TYPE not in P.SERVER_TYPES or isinstance(msg, P.HelloAck):
            raise P.ProtocolError(f"unexpected {msg.TYPE} from the server")
        if isinstance(msg, P.Done):
            self.phase = Phase.DONE
        return msg


def _name(msg: Incoming) -> str:
    return "audio" if isinstance(msg, P.AudioFrame) else msg.TYPE
