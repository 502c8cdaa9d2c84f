"""The host's TCPStore (owned by the host's node launcher) and a joining node's connection to it.

The ranks use the same store (``TORCHELASTIC_USE_AGENT_STORE``: every rank is
a client of the store at ``MASTER_ADDR:MASTER_PORT``, torch/distributed/rendezvous.py
``_agent_store_serves``; the ranks build that client themselves, without libuv:
:mod:`ddpstudio.rank.hoststore`), so one port is all a firewall has to allow. Our own
keys live under ``ddpstudio/``. torch is imported here only, inside functions.

No client asks for libuv: TCPStore's constructor checks ``use_libuv`` (default
True) before it looks at ``is_master`` (torch/csrc/distributed/c10d/TCPStore.cpp,
``TORCH_CHECK_WITH(DistStoreError, is_libuv_tcpstore_backend_available(), "use_libuv
was requested but PyTorch was built without libuv support, ...")``), and the
Windows wheels are built without it (pytorch #139990), so a client with the
default fails there on every attempt. A client never runs libuv's server loop,
so ``use_libuv=False`` changes nothing elsewhere.
"""

from __future__ import annotations

import socket
import time
from datetime import timedelta
from typing import Callable

from ddpstudio.core.nodes import reach
from ddpstudio.core.platform import Platform

PREFIX = "ddpstudio/"
HOST_KEY = PREFIX + "host"
TICKETS_KEY = PREFIX + "tickets"
START_KEY = PREFIX + "start"
ATTEMPT_S = 3.0  # one connection attempt; between attempts a stop request is seen

# The ranks find the launcher's store through these (torch/distributed/rendezvous.py).
AGENT_STORE_ENV = {"TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "0"}


def join_key(ticket: int) -> str:
    return f"{PREFIX}join/{ticket}"


def verdict_key(ticket: int) -> str:
    return f"{PREFIX}verdict/{ticket}"


def beat_key(node: int) -> str:
    return f"{PREFIX}beat/{node}"


def news_key(node: int) -> str:
    return f"{PREFIX}news/{node}"


class StoreError(RuntimeError):
    """The store could not be opened or reached; the message names the address and port.

    ``failure``: how a connection to it failed when that points at a firewall or a route
    (:mod:`reach`), else None.
    """

    def __init__(self, message: str, failure=None) -> None:
        super().__init__(message)
        self.failure = failure


def open_host_store(address: str, port: int, platform: Platform, timeout_s: float = 30.0):
    """The master TCPStore on ``address:port``.

    POSIX: we bind the listening socket to the chosen adapter ourselves and hand
    it over (``master_listen_fd``), so the store is not reachable through other
    adapters. Windows: torch binds it (every adapter); libuv is off there
    because the Windows wheels are built without it (pytorch #139990).
    """
    from torch.distributed import TCPStore

    try:
        if platform.is_windows:
            return TCPStore(address, port, None, True, timedelta(seconds=timeout_s), wait_for_workers=False,
                            use_libuv=False)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((address, port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        # detach: the store owns the descriptor now (closing it under the store aborts the process).
        return TCPStore(address, port, None, True, timedelta(seconds=timeout_s), wait_for_workers=False,
                        master_listen_fd=sock.detach())
    except (OSError, RuntimeError) as exc:
        raise StoreError(f"cannot listen on {address}:{port} ({exc}); choose another --port, or check that "
                         f"{address} is an address of this machine") from None


def connect(address: str, port: int, timeout_s: float, stopped: Callable[[], bool] = lambda: False):
    """A client of the host's store; raises :class:`StoreError` when the host cannot be reached in time,
    or when ``stopped()`` turns true (each attempt lasts at most ``ATTEMPT_S``)."""
    from torch.distributed import DistNetworkError, TCPStore

    deadline = time.monotonic() + timeout_s
    while True:
        attempt = max(0.5, min(ATTEMPT_S, deadline - time.monotonic()))
        try:
            return TCPStore(address, port, None, False, timedelta(seconds=attempt), use_libuv=False)
        except (OSError, RuntimeError) as exc:
            if not isinstance(exc, (OSError, DistNetworkError)):  # not the network: retrying or a firewall hint would mislead
                raise StoreError(f"could not open a client of the host's store at {address}:{port}: "
                                 f"{_first_line(exc)}") from None
            if stopped():
                raise StoreError("stopped while trying to reach the host; nothing was started") from None
            if time.monotonic() < deadline:
                continue
            first = _first_line(exc)
        failure = reach.check(address, port)
        if failure is not None and failure.kind is not reach.Blocked.REFUSED:
            raise StoreError(f"could not reach the host at {address}:{port} within {timeout_s:g} s: blocked: "
                             f"{failure.explain()}. Allow incoming TCP port {port} for DDP Studio's Python in the "
                             "host's firewall, and check the route to the host (docs/multi-machine.md)", failure)
        raise StoreError(f"could not reach the host at {address}:{port} within {timeout_s:g} s ({first}); check "
                         "that the host is still waiting for nodes, that this machine can reach that address, "
                         f"and that no firewall blocks TCP port {port} on the host")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
