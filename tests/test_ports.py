"""ports: real sockets, a real TCPStore, and torch's own parsing of our tcp:// URLs."""

from __future__ import annotations

import os
import socket
import sys
from urllib.parse import urlparse

import psutil
import pytest
import torch.distributed as dist

from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.rendezvous.ports import find_free_port, is_port_free, libuv_env, port_owner, tcp_init_url

rdzv = sys.modules["torch.distributed.rendezvous"]


@pytest.fixture
def listener():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock
    sock.close()


def test_listening_port_is_taken_and_owned_by_us(listener):
    port = listener.getsockname()[1]
    assert not is_port_free(port)
    owner = port_owner(port)
    assert owner is not None
    assert owner["pid"] == os.getpid()
    assert owner["name"] == psutil.Process().name()
    assert owner["cmdline"] == psutil.Process().cmdline()


def test_freed_port_is_free(listener):
    port = listener.getsockname()[1]
    listener.close()
    assert is_port_free(port)
    assert port_owner(port) is None


def test_find_free_port_is_bindable():
    port = find_free_port()
    assert 1 <= port <= 65535
    assert is_port_free(port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert not is_port_free(port)


def test_tcpstore_port_is_taken():
    port = find_free_port()
    store = dist.TCPStore("127.0.0.1", port, 1, True)
    try:
        assert not is_port_free(port)
        assert port_owner(port)["pid"] == os.getpid()
    finally:
        del store


def test_owner_found_without_the_system_wide_table(listener, monkeypatch):
    # macOS denies psutil.net_connections() to non-root users; the
    # per-process fallback must still find our own listener.
    def denied(kind="inet"):
        raise psutil.AccessDenied()

    monkeypatch.setattr(psutil, "net_connections", denied)
    assert port_owner(listener.getsockname()[1])["pid"] == os.getpid()


def test_unreadable_owner_gives_none_fields(listener, monkeypatch):
    # We run as root here, so a process we may not read is simulated: the real psutil.Process, whose two reads
    # are refused. Not a stand-in class for psutil.Process itself: anything that scanned processes meanwhile (a
    # timer of an earlier test firing in pytest-qt's teardown) left stand-ins in psutil's own process cache, and
    # every later process_iter() on that worker failed ('Unreadable' object has no attribute 'as_dict').
    def denied(self):
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "name", denied)
    monkeypatch.setattr(psutil.Process, "cmdline", denied)
    owner = port_owner(listener.getsockname()[1])
    assert owner == {"pid": os.getpid(), "name": None, "cmdline": None}


def test_tcp_urls():
    assert tcp_init_url("127.0.0.1", 29500, LINUX) == "tcp://127.0.0.1:29500"
    assert tcp_init_url("127.0.0.1", 29500, WINDOWS) == "tcp://127.0.0.1:29500?use_libuv=0"
    assert tcp_init_url("::1", 29500, LINUX) == "tcp://[::1]:29500"
    parsed = urlparse(tcp_init_url("::1", 29500, WINDOWS))
    assert (parsed.hostname, parsed.port) == ("::1", 29500)


def test_windows_url_asks_torch_for_the_non_libuv_store(monkeypatch):
    # torch's own query parsing (rendezvous.py:57-70) on a non-Windows host,
    # where libuv is the default: only our Windows URL turns it off.
    monkeypatch.delenv("USE_LIBUV", raising=False)
    for platform, expected in ((WINDOWS, False), (LINUX, True)):
        query = rdzv._query_to_dict(urlparse(tcp_init_url("127.0.0.1", 29500, platform)).query)
        assert rdzv._get_use_libuv_from_query_dict(query) is expected


@pytest.mark.parametrize(("platform", "libuv"), [(WINDOWS, False), (LINUX, True)])
def test_real_tcpstore_from_our_url(platform, libuv, monkeypatch):
    monkeypatch.delenv("USE_LIBUV", raising=False)
    port = find_free_port()
    store, rank, world_size = next(dist.rendezvous(tcp_init_url("127.0.0.1", port, platform), 0, 1))
    try:
        assert (rank, world_size) == (0, 1)
        assert store.libuvBackend is libuv
        store.set("k", "v")
        assert store.get("k") == b"v"
    finally:
        del store


def test_libuv_env():
    assert libuv_env(WINDOWS) == {"USE_LIBUV": "0"}
    assert libuv_env(LINUX) == {}


@pytest.mark.parametrize("port", [0, -1, 65536, True, 80.0])
def test_bad_ports_raise(port):
    for call in (is_port_free, port_owner, lambda p: tcp_init_url("127.0.0.1", p, LINUX)):
        with pytest.raises(ValueError, match="1 to 65535"):
            call(port)
