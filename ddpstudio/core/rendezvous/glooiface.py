"""Whether Gloo can be pinned to an adapter by name (``GLOO_SOCKET_IFNAME``), per platform, and why not.

What the sources say (docs/multi-machine.md, "The adapter on Windows"):

- torch's ProcessGroupGloo constructor (torch/csrc/distributed/c10d/init.cpp)
  reads ``GLOO_SOCKET_IFNAME`` with the C runtime's ``getenv``, ignores a
  value of one character (``strlen(ifnameEnv) > 1``), splits it on commas
  and makes one device per name (``createDeviceForInterface``); without it,
  ``createDefaultDevice`` binds to whatever this machine's host name resolves
  to, which is how a VPN or Hyper-V adapter gets picked (pytorch #77523).
- On Windows that device is Gloo's libuv transport (GlooDeviceFactory.cpp
  registers ``makeUVDevice`` for WIN32). Its ``lookupAddrForIface``
  (gloo/transport/uv/device.cc) walks ``uv_interface_addresses`` and takes
  the first address, IPv4 or IPv6 (``ai_family`` is AF_UNSPEC), whose name
  equals the value byte for byte. libuv names each entry by the adapter's
  ``FriendlyName`` converted to UTF-8, one entry per ``FirstUnicastAddress``
  in ``GetAdaptersAddresses`` order (libuv src/win/util.c).
- psutil's ``net_if_addrs()`` on Windows names adapters by the same
  ``FriendlyName`` and lists each adapter's unicast addresses in the same
  order (psutil/arch/windows/net.c), so its name is the name Gloo wants, and
  its first IP address is the one Gloo would bind.

So on Windows the name pins Gloo only when it is plain ASCII (the narrow
``getenv`` gives the ANSI code page, libuv compares UTF-8), has no comma, is
longer than one character, and the adapter's first address is the chosen one
(a LAN adapter listing an IPv6 address first would bind Gloo there, and ranks
of different address families cannot connect). Otherwise it stays unset and
the reason says what to change. Linux and macOS keep the name as it is.

A dual-stack adapter, Windows' default, lists its IPv6 addresses first
(``GetAdaptersAddresses``' ``FirstUnicastAddress`` chain starts with the
``fe80::`` one: ifaddr PR #59 shows such a listing), so on most machines the
name cannot pin Gloo to the chosen IPv4 address. Nor can anything else a rank
controls: ``init_process_group`` makes Gloo's group with the timeout-only
constructor (``torch/distributed/distributed_c10d.py``
``_create_gloo_process_group``), whose options come from
``ProcessGroupGloo::Options::create_default`` (``ProcessGroupGloo.cpp``):
``GLOO_SOCKET_IFNAME``, else ``createDefaultDevice``, i.e. ``gethostname()``;
``GLOO_DEVICE_TRANSPORT`` picks a transport, not an address, and the uv
``attr.ai_family`` stays ``AF_UNSPEC``. So that case is a warning in the
plan's decisions, with the remedy: unbind IPv6 from that adapter
(``Disable-NetAdapterBinding -Name NAME -ComponentID ms_tcpip6``, as in
Microsoft's NetworkingDsc example) and the name pins it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Iterable


WARNING = "warning: "  # a decision the user should act on, not just read


@dataclass(frozen=True)
class GlooPin:
    """``ifname``: the value for GLOO_SOCKET_IFNAME, or None to leave it unset; ``why``: said to the user."""

    ifname: str | None
    why: str


def ip_addresses(entries: Iterable[str]) -> list[str]:
    """The IPv4/IPv6 addresses among an adapter's psutil entries, in order (MAC addresses dropped)."""
    found = []
    for entry in entries:
        text = str(entry).split("%", 1)[0]  # an IPv6 scope ("fe80::1%eth0")
        try:
            found.append(str(ipaddress.ip_address(text)))
        except ValueError:
            continue
    return found


def pin(name: str, address: str, entries: Iterable[str], is_windows: bool) -> GlooPin:
    """Gloo pinned to adapter ``name`` for ``address``; ``entries``: that adapter's addresses in psutil's order."""
    if not is_windows:
        return GlooPin(name, f"Gloo pinned to {name} (GLOO_SOCKET_IFNAME)")
    unpinned = f"Gloo not pinned to the adapter {name!r}"
    if not name.isascii():
        return GlooPin(None, f"{unpinned}: torch reads GLOO_SOCKET_IFNAME in the ANSI code page and Gloo compares "
                             "it with the UTF-8 name, so a name with non-ASCII letters never matches; rename the "
                             "adapter (Network Connections) to plain letters to pin it")
    if "," in name or len(name) < 2:
        return GlooPin(None, f"{unpinned}: torch splits GLOO_SOCKET_IFNAME on commas and ignores one-character "
                             "values; rename the adapter to pin it")
    ips = ip_addresses(entries)
    first = ips[0] if ips else None
    both_loopback = first is not None and _loopback(first) and _loopback(address)
    if first != address and not both_loopback:
        return GlooPin(None, f"{WARNING}{unpinned}: Gloo binds the first address of the adapter it is pinned to, "
                             f"and {name} lists {first or 'no address'} before {address} (Windows lists a dual-stack "
                             "adapter's IPv6 addresses first); its ranks use the address this machine's name "
                             "resolves to instead, which may be another adapter's (a VPN's: pytorch #77523). To pin "
                             f"Gloo to {address}, unbind IPv6 from that adapter (PowerShell as administrator: "
                             f"Disable-NetAdapterBinding -Name \"{name}\" -ComponentID ms_tcpip6) and start again")
    return GlooPin(name, f"Gloo pinned to {name} (GLOO_SOCKET_IFNAME; on Windows the adapter's name as Network "
                         "Connections shows it)")


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
