"""Admission control, sans-I/O: which connections may wait for a hello, which become sessions.

A WebSocket connection is not a session until its ``hello`` is accepted. Until
then it sits in a small *pending* pool of its own, separate from
``max_sessions``, with a short hello deadline. So sockets that never say hello
cannot lock honest users out:

- the pending pool is bounded overall and per remote address; when a new
  connection finds it full, the *oldest* pending connection (of that address
  when the address is at its own cap, else of anyone) is evicted to make room.
  An honest client says hello within milliseconds of connecting, so it is never
  the oldest for long, while an idle socket is evicted by the next arrival;
- ``too many sessions`` is answered only when the real sessions are full, and
  it carries a retry hint.

The caller (the server's asyncio shell) owns the sockets: it reports events
here and carries out what comes back (close the evicted connections). The
hello deadline itself is a session rule (``core/wire/session_rules.py``). Nothing
here reads a clock or touches a socket.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True)
class Limits:
    max_sessions: int = 8
    max_pending: int = 64  # connections waiting for their hello, all addresses
    max_pending_per_address: int = 16
    max_sessions_per_address: int = 0  # 0: only max_sessions bounds one address

    def __post_init__(self) -> None:
        if self.max_sessions < 1 or self.max_pending < 1 or self.max_pending_per_address < 1:
            raise ValueError("admission limits must be >= 1")
        if self.max_sessions_per_address < 0:
            raise ValueError("max_sessions_per_address must be >= 0")


class Refusal(Enum):
    SESSIONS_FULL = "too many sessions"
    ADDRESS_FULL = "too many sessions from this address"


@dataclass
class Ticket:
    """One connection, from accept to close. ``id`` orders tickets by arrival."""

    id: int
    address: str
    session: bool = False  # promoted: its hello was accepted
    closed: bool = False


@dataclass
class Admission:
    limits: Limits
    _ids: itertools.count[int] = field(default_factory=itertools.count, repr=False)
    # Pending tickets oldest first (dicts keep insertion order; id → ticket).
    _pending: OrderedDict[int, Ticket] = field(default_factory=OrderedDict, repr=False)
    _pending_by_addr: dict[str, int] = field(default_factory=dict, repr=False)
    _sessions_by_addr: dict[str, int] = field(default_factory=dict, repr=False)
    sessions: int = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def pending_of(self, address: str) -> int:
        return self._pending_by_addr.get(address, 0)

    def sessions_of(self, address: str) -> int:
        return self._sessions_by_addr.get(address, 0)

    # ------------------------------------------------------------------ events

    def connect(self, address: str) -> tuple[Ticket, list[Ticket]]:
        """A connection completed its handshake. Returns its ticket and the pending
        tickets evicted to make room (the caller closes those)."""
        evicted = []
        if self.pending_of(address) >= self.limits.max_pending_per_address:
            evicted.append(self._evict_oldest(address))
        elif self.pending >= self.limits.max_pending:
            evicted.append(self._evict_oldest(None))
        ticket = Ticket(id=next(self._ids), address=address)
        self._pending[ticket.id] = ticket
        _bump(self._pending_by_addr, address, +1)
        return ticket, evicted

    def hello(self, ticket: Ticket) -> Refusal | None:
        """The ticket's hello was valid: make it a session, or say why not. A refused
        ticket stays pending until ``close``."""
        if ticket.closed or ticket.session:
            raise ValueError(f"ticket {ticket.id} is not pending")
        if self.sessions >= self.limits.max_sessions:
            return Refusal.SESSIONS_FULL
        per_addr = self.limits.max_sessions_per_address
        if per_addr and self.sessions_of(ticket.address) >= per_addr:
            return Refusal.ADDRESS_FULL
        self._drop_pending(ticket)
        ticket.session = True
        self.sessions += 1
        _bump(self._sessions_by_addr, ticket.address, +1)
        return None

    def close(self, ticket: Ticket) -> None:
        """The connection is gone (any reason). Idempotent."""
        if ticket.closed:
            return
        if ticket.session:
            self.sessions -= 1
            _bump(self._sessions_by_addr, ticket.address, -1)
        else:
            self._drop_pending(ticket)
        ticket.closed = True

    # ------------------------------------------------------------------ internals

    def _evict_oldest(self, address: str | None) -> Ticket:
        victim = next(t for t in self._pending.values() if address is None or t.address == address)
        self.close(victim)
        return victim

    def _drop_pending(self, ticket: Ticket) -> None:
        if self._pending.pop(ticket.id, None) is not None:
            _bump(self._pending_by_addr, ticket.address, -1)


def _bump(counts: dict[str, int], key: str, delta: int) -> None:
    n = counts.get(key, 0) + delta
    if n:
        counts[key] = n
    else:
        counts.pop(key, None)
