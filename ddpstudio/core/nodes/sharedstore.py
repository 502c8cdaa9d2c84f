"""The rendezvous of a multi-machine run through a FileStore on a shared folder (``--store-path``).

The PyTorch-on-Windows blog's way: every rank of every machine opens the same
file (``file:////server/share/pg``) instead of the host's TCP port, and so do
the node launchers, for the handshake and the link (:mod:`handshake`,
:mod:`link`: torch's FileStore and TCPStore share the Store API). Gloo still
opens TCP connections between the ranks, so the adapter and the reach-back
check apply as with the TCP store. The host owns the file: it claims the path
(:mod:`ddpstudio.core.rendezvous.claim`) and removes the file once every node
is done; a joining node never deletes it. torch is imported here only, inside
functions.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Callable

from ddpstudio.core.nodes.store import AGENT_STORE_ENV, StoreError
from ddpstudio.core.plan import Plan
from ddpstudio.core.platform import Platform
from ddpstudio.core.words import counted

POLL_S = 0.1
# The TCP plan builders (nodeplan.host_plan, join_stub_plan) need some valid port; the file's URL replaces it.
PLACEHOLDER_PORT = 29500
VANISH_S = 5.0  # after the host's launcher lets go: the other users close the file (torch then deletes it)


def folder_problem(store_path: str) -> str | None:
    """Why this machine cannot use the store file's folder (missing, not a folder, not writable), or None."""
    folder = os.path.dirname(os.path.abspath(store_path)) or "."
    if os.path.isdir(store_path):
        return (f"the store path {store_path} is a folder; a FileStore needs a file in the shared folder, "
                f"such as {os.path.join(store_path, 'pg')}")
    if not os.path.isdir(folder):
        return (f"the shared folder {folder} is not reachable from this machine (it does not exist here): "
                "connect the network share (the same path as on the host, or give this machine's own path to "
                "it with --store-path), then join again")
    probe = os.path.join(folder, f".ddpstudio-probe-{uuid.uuid4().hex[:8]}")
    try:
        with open(probe, "wb") as fh:
            fh.write(b"ddpstudio")
        os.unlink(probe)
    except OSError as exc:
        return (f"the shared folder {folder} is not writable from this machine ({exc.strerror or exc}): every "
                "machine writes to the store file, so give this machine's user write access to the share")
    return None


def open_store(store_path: str, timeout_s: float = 300.0):
    """The FileStore at ``store_path`` (created when missing); raises :class:`StoreError`."""
    from torch.distributed import FileStore

    try:
        store = FileStore(store_path, -1)
        store.set_timeout(timedelta(seconds=timeout_s))
        return store
    except (OSError, RuntimeError) as exc:
        raise StoreError(f"cannot open the store file {store_path} ({exc}); check the shared folder and "
                         "choose another --store-path if needed") from None


def connect(store_path: str, timeout_s: float, stopped: Callable[[], bool] = lambda: False):
    """A joining node's FileStore: only once the host has created the file (a joining node that opened
    a missing file would create its own, which the host never reads)."""
    problem = folder_problem(store_path)
    if problem:
        raise StoreError(problem)
    deadline = time.monotonic() + timeout_s
    while not _has_content(store_path):
        if stopped():
            raise StoreError("stopped while waiting for the host's store file; nothing was started")
        if time.monotonic() >= deadline:
            raise StoreError(f"the host's store file {store_path} did not appear within {timeout_s:g} s: this "
                             "machine may see a different folder at that path than the host (give this machine's "
                             "own path to the share with --store-path), or the host is no longer waiting")
        time.sleep(POLL_S)
    return open_store(store_path, timeout_s)


def remove(store_path: str, wait_s: float = VANISH_S) -> bool:
    """After the host's launcher let go of its store: wait for torch to delete the file (the last user to
    close it does), then delete what is left (a node that was killed never closes). True if it is gone."""
    deadline = time.monotonic() + wait_s
    while os.path.exists(store_path) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    try:
        os.unlink(store_path)
    except FileNotFoundError:
        pass
    except OSError:
        return False  # Windows: a rank that still has it open; 'ddpstudio clean' finds it later
    return True


def host_on_folder(plan: Plan, store_path: str, platform: Platform) -> Plan:
    """The host's plan (:func:`nodeplan.host_plan`) meeting at the FileStore ``store_path`` instead of its port."""
    from ddpstudio.core.rendezvous.storeurl import file_store_url

    reasons = [r for r in plan.reasons if "store listens on" not in r and not r.startswith("FileStore at")]
    reasons.insert(0, f"{plan.nodes} machines x {counted(plan.ranks_per_node, 'rank')} = {plan.world_size} ranks; "
                      f"every rank and every machine meet at the FileStore {store_path} on the shared folder")
    return replace(plan, store="file", store_path=store_path, store_is_fixed=True, master_port=None,
                   init_method=file_store_url(store_path, platform), env=_without_agent_store(plan.env),
                   reasons=reasons)


def joined_on_folder(plan: Plan, store_path: str, platform: Platform) -> Plan:
    """A joining node's plan (:func:`nodeplan.joined_plan`) with this machine's path to the shared store file.

    The host's URL may name the file by a path only the host has (its own drive letter); the plan
    keeps no ``store_path``, so nothing on this machine ever deletes the host's file.
    """
    from ddpstudio.core.rendezvous.storeurl import file_store_url

    return replace(plan, store="file", store_path=None, store_is_fixed=False, master_port=None,
                   init_method=file_store_url(store_path, platform), env=_without_agent_store(plan.env),
                   reasons=[*plan.reasons, f"the run's FileStore here: {store_path}"])


def _without_agent_store(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in AGENT_STORE_ENV}


def _has_content(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False
