"""Which network adapter a multi-machine run uses, and why: the one that routes to the other machines.

Gloo binds each rank to one adapter (``GLOO_SOCKET_IFNAME``); when it picks a
VPN, Hyper-V or Docker adapter the run fails with "address not valid in its
context" (pytorch #77523) or hangs. So: never loopback unless every node is
on this machine, never a virtual adapter unless the user chose it, and the
reason is shown. Pure: the adapters and the route lookup come in as
arguments (``psutil.net_if_addrs()``/``net_if_stats()`` and :func:`route_source`).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

# Adapter names that are not the LAN: VPNs, hypervisors' switches, container bridges.
VIRTUAL = re.compile(r"docker|^br-|^veth|virbr|vmnet|vboxnet|virtualbox|vmware|vethernet|hyper-v|wsl|^tun|^tap|"
                     r"^wg|wireguard|tailscale|zerotier|^zt|vpn|^utun|^ppp|cni|flannel|calico|npcap|loopback",
                     re.IGNORECASE)


class AdapterError(ValueError):
    """No adapter fits; the message lists what there is and how to choose."""


@dataclass(frozen=True)
class Adapter:
    name: str
    address: str  # IPv4
    netmask: str | None
    up: bool = True

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.address).is_loopback

    @property
    def virtual(self) -> bool:
        return bool(VIRTUAL.search(self.name))

    def holds(self, peer: str) -> bool:
        """Whether ``peer`` is on this adapter's subnet."""
        if not self.netmask:
            return False
        try:
            net = ipaddress.ip_network(f"{self.address}/{self.netmask}", strict=False)
            return ipaddress.ip_address(peer) in net
        except ValueError:
            return False


@dataclass(frozen=True)
class AdapterChoice:
    name: str
    address: str
    reason: str
    others: tuple[str, ...] = ()  # further LAN addresses of this machine (the host lists them in the code)
    entries: tuple[str, ...] = ()  # the adapter's addresses in psutil's order (Gloo binds the first: glooiface)


def adapters(addrs: Mapping[str, Iterable], stats: Mapping[str, object] | None = None) -> list[Adapter]:
    """IPv4 adapters from psutil's ``net_if_addrs()`` (and ``net_if_stats()`` for up/down)."""
    found = []
    for name, entries in addrs.items():
        stat = (stats or {}).get(name)
        up = bool(getattr(stat, "isup", True))
        for entry in entries:
            if getattr(entry, "family", None) == socket.AF_INET and entry.address:
                found.append(Adapter(name, entry.address, getattr(entry, "netmask", None), up))
    return found


def route_source(peer: str) -> str | None:
    """The local address the OS would send from to reach ``peer`` (a UDP connect sends nothing)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((peer, 9))
            return str(sock.getsockname()[0])
    except OSError:
        return None


def _lan_rank(adapter: Adapter) -> tuple[int, str]:
    ip = ipaddress.ip_address(adapter.address)
    return (2 if ip.is_link_local else 0 if ip.is_private else 1, adapter.name)


def _listing(found: list[Adapter]) -> str:
    return ", ".join(f"{a.name} {a.address}" for a in found) or "none"


def choose_adapter(found: list[Adapter], peers: Iterable[str] = (), override: str | None = None,
                   route: Callable[[str], str | None] = route_source) -> AdapterChoice:
    """The adapter for this node. ``peers``: the other machine's addresses (a joining node knows the host's);
    ``override``: the user's ``--ifname`` (an adapter name or one of its addresses)."""
    up = [a for a in found if a.up]
    if override:
        chosen = next((a for a in up if override in (a.name, a.address)), None)
        if chosen is None:
            raise AdapterError(f"no network adapter {override!r} is up with an IPv4 address here; "
                               f"the adapters are: {_listing(up)}")
        return AdapterChoice(chosen.name, chosen.address, f"{chosen.name} ({chosen.address}): chosen with --ifname")
    peers = [p for p in peers if p]
    mine = {a.address for a in up}
    if any(_is_loopback(p) or p in mine for p in peers):
        local = next((a for a in up if a.loopback), None)
        if local is not None:
            return AdapterChoice(local.name, local.address,
                                 f"{local.name} ({local.address}): the host is on this machine")
    for peer in peers:
        same = sorted((a for a in up if not a.loopback and a.holds(peer)), key=_lan_rank)
        if same:
            a = same[0]
            return AdapterChoice(a.name, a.address, f"{a.name} ({a.address}): on the host's subnet ({peer})")
    for peer in peers:
        source = route(peer)
        routed = next((a for a in up if a.address == source and not a.loopback), None)
        if routed is not None and routed.virtual:
            raise AdapterError(f"the route to the host ({peer}) leaves through {routed.name}, a VPN or virtual "
                               f"adapter by its name; if that is meant, pass --ifname {routed.name}")
        if routed is not None:
            return AdapterChoice(routed.name, routed.address,
                                 f"{routed.name} ({routed.address}): the route to the host ({peer}) leaves through it")
    if peers:
        raise AdapterError(f"no adapter here reaches the host ({', '.join(peers)}); the adapters are: "
                           f"{_listing(up)}; check the network, or pass --ifname")
    lan = sorted((a for a in up if not a.loopback and not a.virtual), key=_lan_rank)
    if not lan:
        skipped = [a for a in up if not a.loopback]
        raise AdapterError("no LAN adapter is up here (only loopback" + (f" and virtual ones: {_listing(skipped)}"
                           if skipped else "") + "); connect this machine to the LAN, or choose one with --ifname")
    first = lan[0]
    why = "the only LAN adapter" if len(lan) == 1 else (
        f"the first of {len(lan)} LAN adapters (also {_listing(lan[1:])}; --ifname chooses another)")
    skipped = [a.name for a in up if a.virtual and not a.loopback]
    if skipped:
        why += f"; skipped the virtual adapter(s) {', '.join(sorted(set(skipped)))}"
    return AdapterChoice(first.name, first.address, f"{first.name} ({first.address}): {why}",
                         tuple(a.address for a in lan[1:]))


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def gloo_env(choice: AdapterChoice, is_windows: bool) -> dict[str, str]:
    """GLOO_SOCKET_IFNAME for the chosen adapter, where the name pins Gloo there (:func:`gloo_pin`)."""
    pinned = gloo_pin(choice, is_windows)
    return {"GLOO_SOCKET_IFNAME": pinned.ifname} if pinned.ifname else {}


def gloo_pin(choice: AdapterChoice, is_windows: bool):
    """Whether and why Gloo is pinned to the chosen adapter. On Windows psutil's adapter name is the
    ``FriendlyName`` that Gloo's libuv transport compares with; the sources are cited in
    :mod:`ddpstudio.core.rendezvous.glooiface` and docs/multi-machine.md."""
    from ddpstudio.core.rendezvous.glooiface import pin

    return pin(choice.name, choice.address, choice.entries or (choice.address,), is_windows)


def with_entries(choice: AdapterChoice, addrs: Mapping[str, Iterable]) -> AdapterChoice:
    """The choice with its adapter's addresses in psutil's ``net_if_addrs()`` order."""
    from dataclasses import replace

    return replace(choice, entries=tuple(str(getattr(e, "address", "")) for e in addrs.get(choice.name, ())))
