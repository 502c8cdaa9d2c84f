"""What two nodes compare, the handshake and the heartbeats, through a real TCPStore on loopback
(in this process: fast), and the adapter choice from psutil-shaped inputs."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import namedtuple

import pytest

from ddpstudio.core.nodes import handshake
from ddpstudio.core.nodes.adapter import AdapterError, adapters, choose_adapter, gloo_env, with_entries
from ddpstudio.core.nodes.facts import FACTS_OVERRIDE_ENV, NodeFacts, local_facts, mismatch
from ddpstudio.core.nodes.link import NewsKind, NodeLink
from ddpstudio.core.nodes.store import StoreError, connect, open_host_store
from ddpstudio.core.platform import LINUX, WINDOWS, current

Addr = namedtuple("Addr", "family address netmask broadcast ptp")
Stat = namedtuple("Stat", "isup duplex speed mtu flags")


def facts(**changes) -> NodeFacts:
    base = dict(ddpstudio="0.1.0", python="3.11.7", torch="2.14.1", os_family="posix", backend="gloo", nodes=2,
                ranks_per_node=1)
    return NodeFacts(**{**base, **changes})


# -- facts -------------------------------------------------------------------
@pytest.mark.parametrize("changes, says", [
    ({"os_family": "windows"}, "Gloo cannot mix Windows and Linux ranks"),
    ({"torch": "2.13.0"}, "PyTorch versions differ: this machine has 2.13.0, the host has 2.14.1"),
    ({"python": "3.12.1"}, "Python versions differ"),
    ({"ddpstudio": "0.2.0"}, "DDP Studio versions differ"),
    ({"backend": "nccl"}, "backends differ"),
    ({"ranks_per_node": 2}, "layouts differ: this machine expects 2 nodes x 2 ranks"),
])
def test_each_difference_has_its_own_reason(changes, says):
    assert says in mismatch(facts(), facts(**changes))
    assert mismatch(facts(), facts()) is None


def test_the_test_seam_replaces_what_this_node_reports():
    mine = local_facts(WINDOWS, "gloo", 3, 2, environ={FACTS_OVERRIDE_ENV: json.dumps({"torch": "9.9", "x": "1"})})
    assert (mine.torch, mine.os_family, mine.nodes, mine.ranks_per_node) == ("9.9", "windows", 3, 2)
    assert local_facts(LINUX, "gloo", 2, 1, environ={}).os_family == "posix"


# -- the handshake through a real store ---------------------------------------
@pytest.fixture
def host_store():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = open_host_store("127.0.0.1", port, current())  # each platform's own way of opening it
    yield store, port
    del store


def _host(store, token, host_facts, timeout, out):
    try:
        out["joined"] = handshake.host_wait(store, token, host_facts, timeout, lambda: False,
                                            lambda kind, line: out.setdefault("said", []).append((kind, line)))
        handshake.host_start(store, {"world_size": 2}, out["joined"], "host (127.0.0.1)")
    except handshake.Refused as exc:
        out["refused"] = str(exc)


def test_a_good_node_joins_as_node_1_and_gets_the_start_record(host_store):
    store, port = host_store
    out: dict = {}
    host = threading.Thread(target=_host, args=(store, "secret-token", facts(), 20, out))
    host.start()
    node_rank, start = handshake.join(connect("127.0.0.1", port, 10), "secret-token", facts(), "b (127.0.0.1)", 20)
    host.join(20)
    assert node_rank == 1 and start["plan"] == {"world_size": 2}
    assert start["labels"] == {"0": "host (127.0.0.1)", "1": "b (127.0.0.1)"}
    assert out["said"] == [("joined", "node 1 joined: b (127.0.0.1)")]


def test_bad_requests_are_refused_the_token_first_and_the_host_keeps_waiting(host_store):
    store, port = host_store
    out: dict = {}
    host = threading.Thread(target=_host, args=(store, "secret-token", facts(), 20, out))
    host.start()
    client = connect("127.0.0.1", port, 10)
    with pytest.raises(handshake.Refused, match="wrong token"):  # wrong token AND other torch: the token speaks
        handshake.join(client, "guess", facts(torch="1.0"), "x (127.0.0.1)", 10)
    with pytest.raises(handshake.Refused, match="PyTorch versions differ"):
        handshake.join(client, "secret-token", facts(torch="1.0"), "y (127.0.0.1)", 10)
    with pytest.raises(handshake.Refused, match="layouts differ"):
        handshake.join(client, "secret-token", facts(nodes=3), "z (127.0.0.1)", 10)
    assert handshake.join(client, "secret-token", facts(), "ok (127.0.0.1)", 10)[0] == 1
    host.join(20)
    assert [kind for kind, _ in out["said"]] == ["refused", "refused", "refused", "joined"]
    assert all("secret-token" not in line for _, line in out["said"])


def test_a_host_nobody_joins_gives_up_and_tells_late_nodes(host_store):
    store, port = host_store
    out: dict = {}
    t0 = time.monotonic()
    _host(store, "secret-token", facts(), 0.5, out)
    assert out["refused"].startswith("nobody joined within 0.5 s; nothing was started")
    assert time.monotonic() - t0 < 5
    with pytest.raises(handshake.Refused, match="the host gave up: nobody joined"):
        handshake.join(connect("127.0.0.1", port, 10), "secret-token", facts(), "late (127.0.0.1)", 5)


@pytest.mark.slow
def test_an_unreachable_host_is_a_clear_error_within_the_timeout():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nobody listens here once the probe is closed
    t0 = time.monotonic()
    with pytest.raises(StoreError, match=f"could not reach the host at 127.0.0.1:{port} within 1 s"):
        connect("127.0.0.1", port, 1)
    assert time.monotonic() - t0 < 10


# -- heartbeats and news -------------------------------------------------------
def test_a_silent_node_is_gone_and_a_failed_one_says_why(host_store):
    store, port = host_store
    labels = {0: "a (127.0.0.1)", 1: "b (127.0.0.1)", 2: "c (127.0.0.1)"}
    a = NodeLink(store, 0, 3, labels, stale_s=0.6)
    b = NodeLink(connect("127.0.0.1", port, 5), 1, 3, labels, stale_s=0.6)
    c = NodeLink(connect("127.0.0.1", port, 5), 2, 3, labels, stale_s=0.6)
    b.publish(NewsKind.FAILED, "rank 1 failed first (exit code 1): boom", 123.0, rank=1)
    before = time.time()
    c.beat()  # c's last beat; a loaded host notices it only later
    after = time.time()
    time.sleep(0.5)
    heard = []
    deadline = time.monotonic() + 5
    while len(heard) < 2 and time.monotonic() < deadline:  # c never beats again
        a._last_beat = 0.0
        a.beat()
        heard += a.poll()
        time.sleep(0.1)
    by_node = {n.node: n for n in heard}
    assert by_node[1].kind is NewsKind.FAILED and by_node[1].summary.endswith("boom") and by_node[1].rank == 1
    assert by_node[2].kind is NewsKind.GONE and "no heartbeat" in by_node[2].summary
    # c died after its last beat (kept in ms), not when a noticed it: what its death broke comes later
    assert before - 0.001 <= by_node[2].t <= after, (before, by_node[2].t, after)
    assert a.label(2) == "node 2 (c (127.0.0.1))"
    del c


# -- the adapter ------------------------------------------------------------------
AF = socket.AF_INET
NET = {
    "lo": [Addr(AF, "127.0.0.1", "255.0.0.0", None, None)],
    "docker0": [Addr(AF, "172.17.0.1", "255.255.0.0", None, None)],
    "vEthernet (Default Switch)": [Addr(AF, "172.28.16.1", "255.255.240.0", None, None)],
    "tailscale0": [Addr(AF, "100.101.1.2", "255.255.255.255", None, None)],
    "eth0": [Addr(AF, "192.168.1.20", "255.255.255.0", None, None),
             Addr(socket.AF_INET6, "fe80::1", None, None, None)],
    "wlan0": [Addr(AF, "10.0.0.7", "255.255.255.0", None, None)],
    "eth1": [Addr(AF, "192.168.9.9", "255.255.255.0", None, None)],
}
STATS = {name: Stat(name != "eth1", 0, 0, 1500, "") for name in NET}  # eth1 is down


def test_the_host_takes_a_lan_adapter_never_loopback_or_virtual_and_says_why():
    found = adapters(NET, STATS)
    choice = choose_adapter(found)
    assert (choice.name, choice.address) == ("wlan0", "10.0.0.7") or (choice.name, choice.address) == \
        ("eth0", "192.168.1.20")
    assert set(choice.others) | {choice.address} == {"192.168.1.20", "10.0.0.7"}  # eth1 is down
    assert "docker0" in choice.reason and "tailscale0" in choice.reason and "--ifname" in choice.reason


def test_a_joining_node_takes_the_adapter_on_the_hosts_subnet_or_its_route():
    found = adapters(NET, STATS)
    assert choose_adapter(found, ["192.168.1.5"]).name == "eth0"
    routed = choose_adapter(found, ["8.8.4.4"], route=lambda peer: "10.0.0.7")
    assert routed.name == "wlan0" and "route to the host (8.8.4.4)" in routed.reason
    with pytest.raises(AdapterError, match="leaves through tailscale0, a VPN"):
        choose_adapter(found, ["100.64.0.9"], route=lambda peer: "100.101.1.2")
    with pytest.raises(AdapterError, match="no adapter here reaches the host"):
        choose_adapter(found, ["203.0.113.9"], route=lambda peer: None)


def test_loopback_only_when_the_host_is_this_machine_and_the_user_can_choose():
    found = adapters(NET, STATS)
    assert choose_adapter(found, ["127.0.0.1"]).name == "lo"
    assert choose_adapter(found, ["192.168.1.20"]).name == "lo"  # the host's address is one of ours
    assert choose_adapter(found, override="docker0").address == "172.17.0.1"
    assert choose_adapter(found, override="10.0.0.7").name == "wlan0"
    with pytest.raises(AdapterError, match="no network adapter 'eth1' is up"):
        choose_adapter(found, override="eth1")
    only_virtual = adapters({k: NET[k] for k in ("lo", "docker0")}, STATS)
    with pytest.raises(AdapterError, match="no LAN adapter is up here .*docker0 172.17.0.1"):
        choose_adapter(only_virtual)


def test_gloo_is_pinned_on_linux_and_on_windows_by_the_name_psutil_gives():
    choice = with_entries(choose_adapter(adapters(NET, STATS), ["192.168.1.5"]), NET)
    assert gloo_env(choice, is_windows=False) == {"GLOO_SOCKET_IFNAME": "eth0"}
    # psutil's name on Windows is the FriendlyName Gloo's libuv transport matches (core/rendezvous/glooiface.py).
    assert gloo_env(choice, is_windows=True) == {"GLOO_SOCKET_IFNAME": "eth0"}
    ipv6_first = with_entries(choice, {"eth0": [Addr(socket.AF_INET6, "fe80::1", None, None, None), *NET["eth0"]]})
    assert gloo_env(ipv6_first, is_windows=True) == {}  # Gloo would bind fe80::1: left to the host name


def test_a_node_too_many_is_told_the_run_started_without_it(host_store):
    store, port = host_store
    out: dict = {}
    host = threading.Thread(target=_host, args=(store, "secret-token", facts(), 20, out))
    host.start()
    assert handshake.join(connect("127.0.0.1", port, 10), "secret-token", facts(), "b (127.0.0.1)", 20)[0] == 1
    host.join(20)
    with pytest.raises(handshake.Refused, match="already has all its nodes"):
        handshake.join(connect("127.0.0.1", port, 10), "secret-token", facts(), "c (127.0.0.1)", 5)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.posix_only("binds through master_listen_fd, the POSIX branch; 127.0.0.2 is loopback on Linux")
def test_the_host_store_listens_on_the_chosen_address_only_and_without_libuv_on_windows():
    port = _free_port()
    store = open_host_store("127.0.0.1", port, LINUX)
    assert store.libuvBackend
    with pytest.raises(ConnectionRefusedError):  # the same port on another loopback address: not bound
        socket.create_connection(("127.0.0.2", port), timeout=2).close()
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with pytest.raises(StoreError, match=f"cannot listen on 127.0.0.1:{port}"):
        open_host_store("127.0.0.1", port, LINUX)  # taken: one clear message
    del store
    windows = open_host_store("127.0.0.1", _free_port(), WINDOWS)  # the Windows branch, through the seam
    assert not windows.libuvBackend  # Windows wheels have no libuv (pytorch #139990)
    del windows


def test_a_node_the_host_cannot_connect_back_to_is_refused_as_a_firewall_problem(host_store):
    store, port = host_store
    out: dict = {}
    host = threading.Thread(target=_host, args=(store, "secret-token", facts(), 20, out))
    host.start()
    closed = _free_port()  # nothing listens there: as if this machine's firewall dropped the host's connection
    with pytest.raises(handshake.Refused, match=f"cannot open a TCP connection to this machine at 127.0.0.1:{closed} "
                       r".*Gloo connects in both directions.*firewall") as refused:
        handshake.join(connect("127.0.0.1", port, 10), "secret-token", facts(), "b (127.0.0.1)", 10,
                       probe=("127.0.0.1", closed))
    assert refused.value.blocked  # the Windows front end prints what to allow (core/nodes/firewall.py)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        assert handshake.join(connect("127.0.0.1", port, 10), "secret-token", facts(), "b (127.0.0.1)", 10,
                              probe=listening.getsockname())[0] == 1
    host.join(20)


@pytest.mark.slow
def test_a_joining_node_asked_to_stop_gives_up_at_once():
    port = _free_port()  # nobody listens: connect keeps trying until stopped
    t0 = time.monotonic()
    with pytest.raises(StoreError, match="stopped while trying to reach the host"):
        connect("127.0.0.1", port, 60, stopped=lambda: time.monotonic() - t0 > 0.5)
    assert time.monotonic() - t0 < 10
