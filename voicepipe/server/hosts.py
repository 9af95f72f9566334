"""Which ``host:port`` names are this server's own, for the Origin and Host checks.

DNS rebinding: a page at ``http://evil.example:8765`` whose name the attacker
re-points at 127.0.0.1 makes the victim's browser send ``Host:`` and ``Origin:``
both naming evil.example. Comparing Origin with the client's own Host header
therefore proves nothing. The names are judged against what the server knows
itself: the host it listens on, the loopback names when it listens on loopback,
and, when it listens on every interface, the machine's names and addresses
(an IP literal counts when this machine can bind it, i.e. it is one of its own).
"""

from __future__ import annotations

import ipaddress
import socket
from functools import lru_cache
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "localhost.localdomain"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@lru_cache(maxsize=256)
def _is_local_address(host: str) -> bool:
    """True when ``host`` is an IP literal of this machine (binding it succeeds)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((str(ip), 0))
        return True
    except OSError:
        return False


def split_netloc(netloc: str, default_port: int) -> tuple[str, int] | None:
    """``host[:port]`` (IPv6 in brackets) → (lowercase host, port); None if malformed."""
    try:
        parts = urlsplit(f"//{netloc}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    return host.lower(), port if port is not None else default_port


class OwnHosts:
    """The names under which this server may be reached by a browser."""

    def __init__(self, listen_host: str, port: int) -> None:
        self.listen_host = listen_host.strip("[]").lower()
        self.port = port
        self.loopback_only = is_loopback(self.listen_host)
        names = set(LOOPBACK_NAMES) if self.loopback_only else {self.listen_host}
        if self.listen_host in WILDCARDS:
            names |= set(LOOPBACK_NAMES)
            for name in (socket.gethostname(), socket.getfqdn()):
                if name:
                    names.add(name.lower())
        self.names = frozenset(names)

    def owns(self, netloc: str, default_port: int = 80) -> bool:
        parsed = split_netloc(netloc, default_port)
        if parsed is None:
            return False
        host, port = parsed
        if port != self.port:
            return False
        if host in self.names:
            return True
        if self.listen_host in WILDCARDS:
            return _is_local_address(host)
        return False

    def origin_allowed(self, origin: str | None, allowed: list[str]) -> bool:
        """Browsers always send Origin; programs usually don't, and are let through (they
        cannot be tricked into connecting by a web page, which is what the check is for)."""
        if origin is None:
            return True
        if allowed:
            return "*" in allowed or origin.rstrip("/") in {a.rstrip("/") for a in allowed}
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        default = 443 if parts.scheme == "https" else 80
        return parts.scheme in ("http", "https") and self.owns(parts.netloc, default)
