"""Pinning Gloo to an adapter by name, per platform (core/rendezvous/glooiface.py): on Windows psutil's
FriendlyName is the name Gloo's libuv transport compares with, and Gloo binds that adapter's first address."""

from __future__ import annotations

from ddpstudio.core.gpu import detect_inventory
from ddpstudio.core.nodes.adapter import AdapterChoice, gloo_env, with_entries
from ddpstudio.core.nodes.nodeplan import host_plan, join_stub_plan
from ddpstudio.core.plan import Plan, RecipeSpec
from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.policy import Request, build_plan
from ddpstudio.core.rendezvous.glooiface import ip_addresses, pin

# psutil.net_if_addrs() on Windows: FriendlyName keys, MAC first (AF_LINK), then the unicast addresses in
# GetAdaptersAddresses order (psutil/arch/windows/net.c), the order libuv lists them in for Gloo. Windows' default
# dual-stack adapter lists its IPv6 link-local address first (ifaddr PR #59 shows such a listing).
ETHERNET = ["E8-D8-D1-AA-3C-BB", "fe80::1c2b:9a3f:e10d:77a1", "192.168.1.20"]
IPV4_ONLY = ["E8-D8-D1-AA-3C-BB", "192.168.1.20"]  # IPv6 unbound from the adapter (Disable-NetAdapterBinding)


def _single() -> Plan:
    return Plan(run_id="r1", run_dir="/runs/r1", world_size=2, backend="gloo", device="cpu", store="tcp",
                init_method="tcp://127.0.0.1:5000", master_port=5000, python="/py", recipe=RecipeSpec(batch_size=16))


def test_windows_pins_the_friendly_name_when_gloo_would_bind_the_chosen_ipv4_address():
    assert ip_addresses(ETHERNET) == ["fe80::1c2b:9a3f:e10d:77a1", "192.168.1.20"]
    assert pin("Ethernet 2", "192.168.1.20", IPV4_ONLY, is_windows=True).ifname == "Ethernet 2"
    choice = AdapterChoice("Ethernet 2", "192.168.1.20", "Ethernet 2 (192.168.1.20): the only LAN adapter",
                           entries=tuple(IPV4_ONLY))
    plan = host_plan(_single(), 2, 1, choice, 29400, WINDOWS)
    assert plan.env["GLOO_SOCKET_IFNAME"] == "Ethernet 2"
    assert any(r.startswith("Gloo pinned to Ethernet 2 (GLOO_SOCKET_IFNAME; on Windows") for r in plan.reasons)
    stub = join_stub_plan(2, 2, "192.168.1.10", 29400, choice, WINDOWS)
    assert stub.env["GLOO_SOCKET_IFNAME"] == "Ethernet 2" and stub.init_method.endswith("?use_libuv=0")


def test_windows_leaves_gloo_unpinned_when_the_name_would_bind_another_address_or_never_match():
    ipv6 = pin("Ethernet", "192.168.1.20", ETHERNET, is_windows=True)
    assert ipv6.ifname is None and "lists fe80::1c2b:9a3f:e10d:77a1 before 192.168.1.20" in ipv6.why
    localized = pin("Подключение по локальной сети", "192.168.1.20", IPV4_ONLY, is_windows=True)
    assert localized.ifname is None and "ANSI code page" in localized.why and "rename the adapter" in localized.why
    comma = pin("LAN, upstairs", "192.168.1.20", IPV4_ONLY, is_windows=True)
    assert comma.ifname is None and "splits GLOO_SOCKET_IFNAME on commas" in comma.why
    choice = AdapterChoice("Ethernet", "192.168.1.20", "Ethernet (192.168.1.20)", entries=tuple(ETHERNET))
    plan = host_plan(_single(), 2, 1, choice, 29400, WINDOWS)
    assert "GLOO_SOCKET_IFNAME" not in plan.env
    assert any("Gloo not pinned to the adapter 'Ethernet'" in r for r in plan.reasons)
    # Linux keeps the name whatever the order (the tcp transport; getifaddrs lists IPv4 first there).
    assert gloo_env(choice, is_windows=False) == {"GLOO_SOCKET_IFNAME": "Ethernet"}


def test_the_single_machine_loopback_pin_follows_the_same_rule_on_windows(tmp_path, monkeypatch):
    monkeypatch.setenv("DDPSTUDIO_HOME", str(tmp_path))
    cpu = detect_inventory()  # this machine: no driver, no CUDA
    loop = {"Loopback Pseudo-Interface 1": ["::1", "127.0.0.1"], "Ethernet": ETHERNET}
    plan = build_plan(Request(recipe=RecipeSpec(), store="tcp"), WINDOWS, cpu, interfaces=loop)
    assert plan.env["GLOO_SOCKET_IFNAME"] == "Loopback Pseudo-Interface 1"  # ::1 first is loopback too: works
    odd = {"Замыкание на себя": ["127.0.0.1"], "Ethernet": ETHERNET}
    plan = build_plan(Request(recipe=RecipeSpec(), store="tcp"), WINDOWS, cpu, interfaces=odd)
    assert "GLOO_SOCKET_IFNAME" not in plan.env and any("ANSI code page" in r for r in plan.reasons)
    plan = build_plan(Request(recipe=RecipeSpec()), LINUX, cpu, interfaces=odd)
    assert plan.env["GLOO_SOCKET_IFNAME"] == "Замыкание на себя"


def test_the_choice_carries_its_adapters_addresses_in_psutils_order():
    class Entry:
        def __init__(self, address: str) -> None:
            self.address = address

    choice = AdapterChoice("Ethernet", "192.168.1.20", "why")
    assert with_entries(choice, {"Ethernet": [Entry(a) for a in ETHERNET]}).entries == tuple(ETHERNET)
    assert with_entries(choice, {}).entries == ()


def test_the_default_windows_adapter_is_a_warning_up_front_with_the_remedy():
    # Windows' default: IPv6 first. Gloo cannot be pinned to the IPv4 address, and the plan says so first thing.
    choice = AdapterChoice("Ethernet", "192.168.1.20", "Ethernet (192.168.1.20): the only LAN adapter",
                           entries=tuple(ETHERNET))
    for plan in (host_plan(_single(), 2, 1, choice, 29400, WINDOWS),
                 join_stub_plan(2, 2, "192.168.1.10", 29400, choice, WINDOWS)):
        assert "GLOO_SOCKET_IFNAME" not in plan.env
        [warning] = [r for r in plan.reasons if r.startswith("warning: ")]
        assert warning.startswith("warning: Gloo not pinned to the adapter 'Ethernet': Gloo binds the first address "
                                  "of the adapter it is pinned to, and Ethernet lists fe80::1c2b:9a3f:e10d:77a1 "
                                  "before 192.168.1.20 (Windows lists a dual-stack adapter's IPv6 addresses first)")
        assert warning.endswith('To pin Gloo to 192.168.1.20, unbind IPv6 from that adapter (PowerShell as '
                                'administrator: Disable-NetAdapterBinding -Name "Ethernet" -ComponentID ms_tcpip6) '
                                'and start again')
    # With IPv6 unbound the same adapter pins, without a warning.
    unbound = AdapterChoice("Ethernet", "192.168.1.20", "why", entries=tuple(IPV4_ONLY))
    plan = host_plan(_single(), 2, 1, unbound, 29400, WINDOWS)
    assert plan.env["GLOO_SOCKET_IFNAME"] == "Ethernet" and not any(r.startswith("warning: ") for r in plan.reasons)
