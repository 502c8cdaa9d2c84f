"""A multi-machine rank's rendezvous: the host's store as a TCPStore client built without libuv.

The node plan makes every rank a client of the host launcher's store
(``TORCHELASTIC_USE_AGENT_STORE``, core/nodes/store.py). Left to torch 2.14.1,
``torch/distributed/rendezvous.py`` ``_create_c10d_store`` builds that client as
``TCPStore(host_name=hostname, port=port, world_size=world_size, is_master=False,
timeout=timeout)`` whenever ``_agent_store_serves(hostname, port)``: no ``use_libuv``,
so the constructor's default True. The ``use_libuv`` that ``env://`` and ``tcp://``
read from the URL's query or ``USE_LIBUV`` (``_get_use_libuv_from_query_dict``) is
passed on the other branch only. Windows wheels are built without libuv, and the
constructor refuses it before looking at ``is_master`` ("use_libuv was requested but
PyTorch was built without libuv support": pytorch #148283, #139990). So the rank
builds the same client with ``use_libuv=False``, under the ``PrefixStore("default_pg")``
that ``init_process_group`` puts over a store it builds itself and not over one passed in
(``distributed_c10d.py``: that line sits in its ``if store is None`` branch), and hands
it to ``init_process_group(store=...)``: the group's keys are where torch would put them,
so a rank whose torch built its own client meets this one. A client never runs libuv's server, so this is done on every
platform: one path, which the Linux tests run too.

Light to import (the rank helper loads it before the script's torch is whole).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

AGENT_ENV = "TORCHELASTIC_USE_AGENT_STORE"  # core/nodes/store.py AGENT_STORE_ENV


def _query(text: str) -> dict[str, str]:
    """torch's ``_query_to_dict``: ``rank=0&world_size=2`` -> ``{"rank": "0", "world_size": "2"}``."""
    return dict(pair.split("=", 1) for pair in text.split("&") if "=" in pair)


def _endpoint(url: str) -> tuple[str | None, int | None, dict[str, str]] | None:
    """Host, port and query of an ``env://`` or ``tcp://`` URL as torch's handlers read them; None for others."""
    parsed = urlparse(url)
    if parsed.scheme == "env":
        port = os.environ.get("MASTER_PORT")
        return os.environ.get("MASTER_ADDR"), int(port) if port and port.isdigit() else None, _query(parsed.query)
    if parsed.scheme == "tcp":
        return parsed.hostname, parsed.port, _query(parsed.query)
    return None


def _served(host: str | None, port: int | None) -> bool:
    """torch's ``_agent_store_serves``: the flag, and the URL's endpoint is ``MASTER_ADDR:MASTER_PORT``."""
    return (os.environ.get(AGENT_ENV) == str(True) and host is not None and port is not None
            and os.environ.get("MASTER_ADDR") == host and os.environ.get("MASTER_PORT") == str(port))


def _number(given: Any, query: dict[str, str], key: str, env: str) -> int:
    """A rank or world size as torch's handlers take it: the argument, else the URL's query, else the variable."""
    if given is not None and int(given) >= 0:
        return int(given)
    return int(query.get(key) or os.environ[env])


def with_host_store(arguments: dict[str, Any]) -> dict[str, Any]:
    """``init_process_group``'s keyword arguments with ``store=`` the host's store where torch would build that
    client itself (and ask for libuv); the same arguments where it would not."""
    if arguments.get("store") is not None:
        return arguments
    endpoint = _endpoint(arguments.get("init_method") or "env://")
    if endpoint is None or not _served(endpoint[0], endpoint[1]):
        return arguments
    host, port, query = endpoint
    from datetime import timedelta

    from torch.distributed import PrefixStore, TCPStore
    from torch.distributed.constants import default_pg_timeout

    rank = _number(arguments.get("rank"), query, "rank", "RANK")
    world_size = _number(arguments.get("world_size"), query, "world_size", "WORLD_SIZE")
    timeout = arguments.get("timeout") or default_pg_timeout
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout))
    store = PrefixStore("default_pg", TCPStore(host, port, world_size, False, timeout, use_libuv=False))
    kept = {k: v for k, v in arguments.items() if k != "init_method"}
    return {**kept, "store": store, "rank": rank, "world_size": world_size}
