"""TCP ports for the TCPStore: is one free, who holds it, and the init URL to use.

Rank 0 listens on the store port, so a port that is already taken fails the
launch; we check before launching and, when it is taken, name the process.
"""

from __future__ import annotations

import ntpath
import socket
from typing import Any

import psutil

from ddpstudio.core.platform import Platform

__all__ = ["find_free_port", "is_port_free", "libuv_env", "port_owner", "tcp_init_url"]


def _check_port(port: int) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"Port {port!r} is out of range: choose a TCP port from 1 to 65535.")


def _bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` without address reuse; the caller closes it."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        # With SO_REUSEADDR a bind can succeed next to a socket in TIME_WAIT
        # (POSIX) or even next to a live listener (Windows): keep it off.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
        exclusive = getattr(socket, "SO_EXCLUSIVEADDRUSE", None)  # Windows only
        if exclusive is not None:
            # By default Windows lets a bind to 127.0.0.1:P succeed beside a
            # wildcard listener on P (the TCPStore binds the wildcard);
            # exclusive use makes that bind fail (Microsoft, "Using
            # SO_REUSEADDR and SO_EXCLUSIVEADDRUSE").
            sock.setsockopt(socket.SOL_SOCKET, exclusive, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def is_port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a TCP bind to ``host:port`` succeeds right now (then let go at once).

    Conservative: a port with connections still in TIME_WAIT counts as taken.
    """
    _check_port(port)
    try:
        _bind(host, port).close()
    except OSError:
        return False
    return True


def find_free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free on ``host``. Another process may take it
    before we use it, so launch soon and treat a bind failure as "try again"."""
    with _bind(host, 0) as sock:
        return int(sock.getsockname()[1])


def _listeners() -> list[tuple[int | None, int]]:
    """(pid, port) of every listening TCP socket we are allowed to see."""
    try:
        conns = [(c.pid, c) for c in psutil.net_connections(kind="tcp")]
    except psutil.AccessDenied:
        # macOS refuses the system-wide table to non-root users; ask each
        # process we may inspect instead.
        conns = []
        for proc in psutil.process_iter():
            try:
                conns.extend((proc.pid, c) for c in proc.net_connections(kind="tcp"))
            except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
    return [(pid, c.laddr.port) for pid, c in conns if c.status == psutil.CONN_LISTEN and c.laddr]


def port_owner(port: int) -> dict[str, Any] | None:
    """``{"pid", "name", "cmdline"}`` of the process listening on ``port``, or
    ``None`` when nothing listens there. Fields we may not read are ``None``
    (another user's process, or one that just exited)."""
    _check_port(port)
    pid = next((pid for pid, p in _listeners() if p == port), -1)
    if pid == -1:
        return None
    owner: dict[str, Any] = {"pid": pid, "name": None, "cmdline": None}
    if pid is None:
        return owner  # Linux hides other users' sockets' pids from non-root
    try:
        proc = psutil.Process(pid)
    except psutil.Error:
        return owner
    for field, read in (("name", proc.name), ("cmdline", proc.cmdline)):
        try:
            owner[field] = read()
        except (psutil.Error, OSError):
            # Not only AccessDenied: psutil's Windows name() goes through exe(), whose
            # NtQuerySystemInformation(SystemProcessIdInformation) can fail with a bare OSError
            # (WinError 87; psutil/_pswindows.py ``exe``: cext.proc_exe; always under Wine 8).
            pass
    if owner["name"] is None and owner["cmdline"]:
        owner["name"] = ntpath.basename(owner["cmdline"][0])  # name() is the executable's file name
    return owner


def tcp_init_url(host: str, port: int, platform: Platform) -> str:
    """The ``tcp://`` init_method URL for a TCPStore at ``host:port``.

    On Windows it asks for the non-libuv store: official Windows wheels are
    built without libuv, and since torch 2.4 TCPStore wants it by default
    ("use_libuv was requested but PyTorch was build without libuv support",
    pytorch #139990).
    """
    _check_port(port)
    netloc_host = f"[{host}]" if ":" in host else host  # IPv6 literal
    url = f"tcp://{netloc_host}:{port}"
    return url + "?use_libuv=0" if platform.is_windows else url


def libuv_env(platform: Platform) -> dict[str, str]:
    """Environment for a rank so every TCPStore it makes avoids libuv on Windows
    (``env://`` and torch.elastic read ``USE_LIBUV``; pytorch #139990)."""
    return {"USE_LIBUV": "0"} if platform.is_windows else {}
