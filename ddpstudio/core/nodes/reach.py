"""Why a TCP connection to another node fails: refused, dropped (as a firewall does) or no route.

Gloo and the store fail with their own texts ("Connection timed out",
"DistNetworkError ..."), which do not say whether a firewall is in the way.
One plain ``connect`` tells: a closed port answers at once with a reset
(refused); a firewall that drops (Windows Defender Firewall's default for a
program it was not told about) lets the attempt time out; a route or rule
that refuses ends it at once with "no route"/"permission denied".
"""

from __future__ import annotations

import enum
import errno
import socket
from dataclasses import dataclass

CHECK_S = 3.0  # one connection attempt; a LAN answers within milliseconds

# Windows Sockets error numbers (winsock2.h); Python's errno lacks them elsewhere.
_WSA_NO_ROUTE = {10013, 10050, 10051, 10065}  # WSAEACCES, WSAENETDOWN, WSAENETUNREACH, WSAEHOSTUNREACH
_NO_ROUTE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ENETDOWN, errno.EACCES, errno.EPERM, *_WSA_NO_ROUTE}


class Blocked(enum.StrEnum):
    REFUSED = "refused"  # a reset: nothing listens on the port, or a firewall rejects
    DROPPED = "dropped"  # no answer at all: a firewall drops, or the machine is off
    NO_ROUTE = "no_route"  # a route or a firewall rule refuses the address


@dataclass(frozen=True)
class Failure:
    """A connection that did not open: where to, how, and the system's words for it."""

    address: str
    port: int
    kind: Blocked
    detail: str

    @property
    def where(self) -> str:
        return f"{self.address}:{self.port}"

    def explain(self) -> str:
        """What it means, naming the address and the port (one sentence, no advice)."""
        if self.kind is Blocked.DROPPED:
            return (f"TCP connections to {self.where} get no answer ({self.detail}): a firewall on that machine "
                    f"or on the way drops them (or a route loses them, or the machine is off)")
        if self.kind is Blocked.NO_ROUTE:
            return (f"TCP connections to {self.where} are refused by a route or firewall rule ({self.detail}): "
                    "this machine has no way to that address")
        return (f"{self.where} refused the TCP connection ({self.detail}): nothing listens on port {self.port} "
                "there, or a firewall rejects it")


def classify(address: str, port: int, exc: OSError) -> Failure:
    """The failure that ``exc`` (from a ``connect``) is."""
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return Failure(address, port, Blocked.DROPPED, "timed out")
    if isinstance(exc, ConnectionRefusedError):
        return Failure(address, port, Blocked.REFUSED, exc.strerror or "connection refused")
    code = getattr(exc, "winerror", None) or exc.errno
    kind = Blocked.NO_ROUTE if code in _NO_ROUTE else Blocked.REFUSED
    return Failure(address, port, kind, exc.strerror or str(exc) or type(exc).__name__)


def check(address: str, port: int, timeout_s: float = CHECK_S) -> Failure | None:
    """Open and close one TCP connection to ``address:port``; None when it opened."""
    try:
        socket.create_connection((address, port), timeout=timeout_s).close()
        return None
    except OSError as exc:
        return classify(address, port, exc)
