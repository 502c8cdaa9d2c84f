"""Two machines as two network namespaces joined by a veth pair (created and removed here): the host
and the joining node each choose the veth adapter by themselves, not loopback, and train together."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ddpstudio.core import protocol
from tests.test_nodes_run import Node

pytestmark = [pytest.mark.slow, pytest.mark.posix_only("network namespaces are Linux's")]

SUBNET = "10.213.0"  # only addresses inside the namespaces this test creates


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)


@pytest.fixture
def two_machines():
    tag = f"{os.getpid() % 100000}"
    spaces, links = (f"ddps13a{tag}", f"ddps13b{tag}"), (f"lan{tag}a", f"lan{tag}b")
    made: list[str] = []
    if shutil.which("ip") is None:
        pytest.skip("no 'ip' command here (iproute2), so no network namespaces")
    try:
        for ns in spaces:
            done = _ip("netns", "add", ns)
            if done.returncode != 0:
                pytest.skip(f"cannot create network namespaces here ('ip netns add' said: {done.stderr.strip()}; "
                            "it needs root or CAP_SYS_ADMIN)")
            made.append(ns)
        steps = [("link", "add", links[0], "type", "veth", "peer", "name", links[1]),
                 ("link", "set", links[0], "netns", spaces[0]), ("link", "set", links[1], "netns", spaces[1])]
        for i, (ns, link) in enumerate(zip(spaces, links)):
            steps += [("-n", ns, "addr", "add", f"{SUBNET}.{i + 1}/24", "dev", link),
                      ("-n", ns, "link", "set", link, "up"), ("-n", ns, "link", "set", "lo", "up")]
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                pytest.skip(f"cannot wire the namespaces ('ip {' '.join(step)}' said: {done.stderr.strip()})")
        yield spaces, links
    finally:
        for ns in made:  # deleting a namespace deletes its end of the veth pair, and so the pair
            _ip("netns", "del", ns)


def test_two_namespaces_choose_the_veth_adapter_and_train_together(studio_home, two_machines):
    (host_ns, join_ns), (host_link, join_link) = two_machines
    host = Node("host", "--nodes", "2", "--ranks-per-node", "1", "--max-steps", "10", "--model", "mlp",
                "--batch-size", "8", "--image-size", "8", "--lr", "0.1", "--join-timeout", "90",
                prefix=("ip", "netns", "exec", host_ns))
    join = None
    try:
        code = host.code()
        join = Node("join", code, "--join-timeout", "90", prefix=("ip", "netns", "exec", join_ns))
        assert host.wait(240) == 0, host.stderr
        assert join.wait(60) == 0, join.stderr
        [host_start] = host.of(protocol.RUN_STARTED)
        [join_start] = join.of(protocol.RUN_STARTED)
        assert f"network adapter {host_link} ({SUBNET}.1): the only LAN adapter" in host_start.get("reasons")
        assert (f"network adapter {join_link} ({SUBNET}.2): on the host's subnet ({SUBNET}.1)"
                in join_start.get("reasons"))
        assert [e.rank for e in host.of(protocol.RANK_STARTED)] == [0]
        assert [e.rank for e in join.of(protocol.RANK_STARTED)] == [1]
        losses = [e.get("loss") for e in host.of(protocol.GLOBAL_STEP)]
        assert len(losses) == 10 and losses[-1] < losses[0], losses  # batch 8: the loss is noisy step to step, so first against last
    finally:
        for node in (host, join):
            if node is not None:
                node.kill()


def test_an_unreachable_host_is_a_clear_error_within_the_join_timeout(studio_home, two_machines):
    import time

    from ddpstudio.core.nodes import joincode

    (_, join_ns), _ = two_machines
    code = joincode.encode(joincode.JoinCode((f"{SUBNET}.1",), 29511, "r-gone", 2, 1, joincode.new_token()))
    t0 = time.monotonic()
    join = Node("join", code, "--join-timeout", "3", prefix=("ip", "netns", "exec", join_ns))
    assert join.wait(60) == 2
    took = time.monotonic() - t0
    assert f"could not reach the host at {SUBNET}.1:29511 within 3 s" in join.stderr, join.stderr
    assert "no firewall blocks TCP port 29511 on the host" in join.stderr
    assert join.of(protocol.RANK_STARTED) == [] and took < 30, took


def test_a_port_the_hosts_firewall_drops_is_named_a_firewall_problem_with_address_and_port(studio_home,
                                                                                            two_machines):
    """The host's namespace drops incoming TCP to the store's port, as a firewall does: a policy-routing rule
    (no iptables/nft here) sends it to a blackhole route before the local table is consulted."""
    import signal
    import time

    (host_ns, join_ns), (host_link, _) = two_machines
    port = 29600 + os.getpid() % 300
    for step in (("rule", "add", "pref", "100", "lookup", "local"), ("rule", "del", "pref", "0"),
                 ("rule", "add", "pref", "10", "iif", host_link, "ipproto", "tcp", "dport", str(port), "blackhole")):
        done = _ip("-n", host_ns, *step)
        if done.returncode != 0:
            pytest.skip(f"cannot add a port rule in the namespace ('ip {' '.join(step)}' said: {done.stderr.strip()}; "
                        "it needs policy routing with port selectors, Linux 4.17+)")
    host = Node("host", "--nodes", "2", "--ranks-per-node", "1", "--port", str(port), "--join-timeout", "90",
                prefix=("ip", "netns", "exec", host_ns))
    join = None
    try:
        code = host.code()
        host.wait_for("the store listening", lambda: any("waiting up to" in (e.get("line") or "")
                                                         for e in host.of(protocol.LOG)), 60)
        t0 = time.monotonic()
        join = Node("join", code, "--join-timeout", "3", prefix=("ip", "netns", "exec", join_ns))
        assert join.wait(60) == 2
        took = time.monotonic() - t0
        assert (f"could not reach the host at {SUBNET}.1:{port} within 3 s: blocked: TCP connections to "
                f"{SUBNET}.1:{port} get no answer (timed out): a firewall on that machine or on the way drops them"
                in join.stderr), join.stderr
        assert f"Allow incoming TCP port {port} for DDP Studio's Python in the host's firewall" in join.stderr
        assert join.stderr.count("ddpstudio: error:") == 1 and join.of(protocol.RANK_STARTED) == []
        host.proc.send_signal(signal.SIGINT)
        assert host.wait(30) == 2 and host.of(protocol.RANK_STARTED) == []
        print(f"'ddpstudio join' named the dropped port {took:.1f} s after it started (join timeout 3 s)")
    finally:
        for node in (host, join):
            if node is not None:
                node.kill()


def test_a_route_that_refuses_the_host_is_named_with_address_and_port(studio_home, two_machines):
    from ddpstudio.core.nodes import joincode

    (_, join_ns), _ = two_machines
    done = _ip("-n", join_ns, "route", "add", "prohibit", f"{SUBNET}.1/32")
    if done.returncode != 0:
        pytest.skip(f"cannot add a prohibit route in the namespace: {done.stderr.strip()}")
    code = joincode.encode(joincode.JoinCode((f"{SUBNET}.1",), 29512, "r-walled", 2, 1, joincode.new_token()))
    join = Node("join", code, "--join-timeout", "2", prefix=("ip", "netns", "exec", join_ns))
    assert join.wait(60) == 2
    assert (f"could not reach the host at {SUBNET}.1:29512 within 2 s: blocked: TCP connections to {SUBNET}.1:29512 "
            "are refused by a route or firewall rule (Permission denied)" in join.stderr), join.stderr
