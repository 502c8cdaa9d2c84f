"""A rank that could not listen on its port: which port, and which process holds it.

Scripts in the official DDP tutorial's style hard-code ``MASTER_PORT``
(12355). When that port is taken, rank 0's TCPStore fails with
``... port: 12355, useIpv6: false, code: -98, name: EADDRINUSE, message:
address already in use`` (torch 2.14.1, ``TCPStoreLibUvBackend.cpp`` /
``TCPStoreBackend.cpp``; on Windows ``code: -4091`` or WSA error 10048). The
root cause then names the port and its holder (best effort: another user's
process cannot be named) instead of blaming leftovers of an earlier run.
"""

from __future__ import annotations

import re
from typing import Any, Callable

_IN_USE = re.compile(r"address already in use|eaddrinuse|errno:? ?98\b|error:? ?10048|wsaeaddrinuse",
                     re.IGNORECASE)
# "port: 12355," (TCPStore), "127.0.0.1:12355" (Gloo's bind), "port 12355"
_PORT = re.compile(r"\bport\b[\s:=]*(?P<port>\d{2,5})\b|:(?P<hostport>\d{2,5})\b.*already in use",
                   re.IGNORECASE)
HELD_BY = "is already in use, held by"  # core/hints.py recognises the finding by these words
# The same for the port DDP Studio chose free for the run (MASTER_PORT): taken by another process of the run.
OWN_PORT_TAKEN = "more processes than ranks meet there"


def port_in_text(text: str) -> int | None:
    """The port an "address already in use" error names, if it names one."""
    for match in _PORT.finditer(text):
        value = int(match.group("port") or match.group("hostport"))
        if 0 < value < 65536:
            return value
    return None


def busy_port_note(text: str, owner_of: Callable[[int], dict[str, Any] | None] | None = None,
                   ours: int | None = None) -> str | None:
    """One sentence for a failure whose text says "address already in use"; None for any other failure.

    ``owner_of`` is the seam for :func:`ddpstudio.core.rendezvous.ports.port_owner`. ``ours``: the port DDP Studio
    chose free for the run's ranks (the plan's ``master_port``). Taken there, it was another process of the run
    that listened first: copies of a script that each start ranks of their own (Lightning's ddp_spawn, Ignite's
    Parallel with nproc_per_node, started once per rank: helper trials 2026-12-07), not the script's own port.
    """
    if not _IN_USE.search(text):
        return None
    port = port_in_text(text)
    if port is None:
        return ("a rank could not listen: its address (port) is already in use by another process; "
                "the error does not say which port")
    if owner_of is None:
        from ddpstudio.core.rendezvous.ports import port_owner as owner_of
    owner = owner_of(port)
    if owner is None:
        holder = "a process that has exited since (nothing listens there now)"
    elif owner.get("pid") is None:
        holder = "a process DDP Studio may not identify (another user's)"
    else:
        name = owner.get("name") or "a process"
        cmdline = " ".join(owner.get("cmdline") or [])[:120]
        holder = f"{name} (pid {owner['pid']}" + (f": {cmdline})" if cmdline else ")")
    if port == ours:
        return (f"port {port}, the one DDP Studio chose free for this run's ranks (MASTER_PORT), was taken by "
                f"another process of the run, {holder}, so {OWN_PORT_TAKEN}: each copy of the script seems to "
                "start ranks of its own")
    return (f"port {port} {HELD_BY} {holder}; the rank could not listen on it. If your script sets this "
            f"port (MASTER_PORT), change it or end that process")
