"""A host and a joining node over loopback, with a PyTorch that has no libuv (as the Windows wheels):
every TCPStore a rank or a joining node makes must not ask for it (issue 19, items 2 and 3).

Off Windows, ``tests/standins/nolibuv`` makes ``TCPStore`` refuse ``use_libuv=True`` in every process
(the node launchers, and the ranks through the rank helper's chained sitecustomize); on windows-latest the
PyPI wheel itself has no libuv, so this is the real thing there. The loopback adapter's name comes from
psutil ('lo' here, 'Loopback Pseudo-Interface 1' on Windows), and nothing here signals a process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from ddpstudio.core import protocol
from tests.test_nodes_run import _studio, nodes  # noqa: F401 (nodes: the fixture)

STANDIN = Path(__file__).resolve().parent / "standins" / "nolibuv"
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def loopback_name() -> str:
    """The adapter holding 127.0.0.1, as psutil names it (Windows: its FriendlyName, which Gloo matches)."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address == "127.0.0.1" for a in addresses):
            return name
    pytest.skip("no adapter holds 127.0.0.1 here")


def _env(log: Path) -> dict[str, str]:
    paths = [str(STANDIN), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(paths), "NOLIBUV_LOG": str(log)}


def _stores(log: Path) -> list[tuple[int, bool, bool]]:
    """(pid, is_master, use_libuv) of every TCPStore the processes made."""
    found = []
    for line in log.read_text(encoding="utf-8").splitlines():
        pid, master, libuv = line.split()
        found.append((int(pid), master == "is_master=True", libuv == "use_libuv=True"))
    return found


WORKLOADS = {
    "recipe": ["--model", "mlp", "--batch-size", "8", "--image-size", "8", "--max-steps", "3"],
    "env-style script": ["--script", str(SCRIPTS / "ddp_env_style.py"), "--script-style", "env", "--", "3"],
}


@pytest.mark.slow
@pytest.mark.timeout(280)  # below pytest-timeout's 300 s, which ends the whole run on Windows
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_host_and_join_meet_through_stores_that_never_ask_for_libuv(studio_home, nodes, tmp_path, workload):
    log = tmp_path / "stores.log"
    env = _env(log)
    host = nodes("host", "--nodes", "2", "--ranks-per-node", "1", "--ifname", loopback_name(), "--join-timeout",
                 "60", *WORKLOADS[workload], env=env)
    join = nodes("join", host.code(), "--join-timeout", "60", env=env)
    codes = join.wait(180), host.wait(60)
    endings = [(e.get("state"), e.get("summary")) for node in (host, join) for e in node.of(protocol.RUN_FINISHED)]
    assert codes == (0, 0), (endings, join.stderr[-2000:], host.stderr[-2000:])
    assert [state for state, _ in endings] == [protocol.FINISHED] * 2, endings
    stores = _stores(log)
    clients = {pid for pid, master, libuv in stores if not master}
    # The joining launcher and both ranks each made a client of the host's store; none asked for libuv.
    assert len(clients) >= 3, stores
    assert not [s for s in stores if s[2] and not s[1]], stores
    assert "use_libuv was requested" not in host.stderr + join.stderr


@pytest.mark.slow
def test_a_store_error_that_is_not_the_network_is_said_at_once_without_a_firewall_hint(studio_home):
    # The stand-in refuses every store with a DistStoreError: no connection is ever tried, so retrying until the
    # join timeout and then blaming a firewall (as before issue 19) would only hide it.
    code = ("import time\n"
            "from ddpstudio.core.nodes import store\n"
            "t0 = time.monotonic()\n"
            "try:\n"
            "    store.connect('127.0.0.1', 29999, 30)\n"
            "except store.StoreError as exc:\n"
            "    print(f'{time.monotonic() - t0:.1f}|{exc.failure}|{exc}')\n")
    env = {**os.environ, **_env(studio_home / "stores.log"), "NOLIBUV_REFUSE": "all"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90, env=env)
    seconds, failure, message = done.stdout.strip().split("|", 2)
    assert message == ("could not open a client of the host's store at 127.0.0.1:29999: TCPStore is broken in this "
                       "PyTorch (test stand-in)"), done.stderr[-2000:]
    assert failure == "None" and float(seconds) < 10


def test_on_windows_a_script_across_machines_needs_the_rank_helper(studio_home):
    # Through the platform seam: refused before any adapter, port or process is touched.
    result = _studio("host", "--nodes", "2", "--script", str(SCRIPTS / "ddp_env_style.py"), "--no-rank-helper",
                     env={"DDPSTUDIO_PLATFORM": "windows"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ddpstudio: error: --no-rank-helper: on Windows a script's ranks reach the "
                                    "host's store through DDP Studio's rank helper"), result.stderr
