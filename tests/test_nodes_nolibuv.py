"""A host and a joining node over loopback, with a PyTorch that has no libuv (as the Windows wheels):
every TCPStore a rank or a joining node makes must not ask for it (issue 19, items 2 and 3).

Off Windows, ``tests/standins/nolibuv`` makes ``TCPStore`` refuse ``use_libuv=True`` in every process
(the node launchers, and the ranks through the rank helper's chained sitecustomize); on windows-latest the
PyPI wheel itself has no libuv, so this is the real thing there. The loopback adapter's name comes from
psutil ('lo' here, 'Loopback Pseudo-Interface 1' on Windows), and nothing here signals a process.

Each workload (the recipe, an env-style script) runs once, two nodes of two ranks, and several tests read
it: the libuv checks here, and the world-of-four and torchrun-variable checks (POSIX only, as before).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from ddpstudio.core import protocol
from ddpstudio.core.cleanup import registry
from ddpstudio.core.nodes import joincode
from tests.conftest import live_processes_of, seed_cache
from tests.test_nodes_run import Node, _studio
from tests.test_nodes_script import _finished, _lines

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


# Each workload is one run of two nodes of two ranks, read by several tests: this file's libuv checks, and the
# world-of-four and torchrun-variable checks that ran their own identical runs in test_nodes_run.py and
# test_nodes_script.py (each run costs two launchers and four ranks a torch import apiece). Off Windows the
# stand-in refuses only what the product must never ask for, and logs each store: a passing run is the run
# those tests made without it.
WORKLOADS = {
    "recipe": ["--model", "mlp", "--batch-size", "8", "--image-size", "8", "--lr", "0.1", "--max-steps", "4"],
    "env-style script": ["--script", str(SCRIPTS / "env_style.py"), "--script-style", "env", "--", "4",
                         "--show-ranks"],
}


@dataclass(frozen=True)
class World:
    """One finished (or failed) host + joining node of two ranks each, its home and its stores' log."""

    home: Path
    host: Node
    join: Node
    code: str
    log: Path


def _two_nodes_of_two(folder: Path, cache: Path, workload: str) -> World:
    home = seed_cache(folder / "home", cache)
    log = folder / "stores.log"
    env = {"DDPSTUDIO_HOME": str(home), **_env(log)}
    host = Node("host", "--nodes", "2", "--ranks-per-node", "2", "--ifname", loopback_name(), "--join-timeout",
                "60", *WORKLOADS[workload], env=env)
    join = None
    try:
        code = host.code()
        join = Node("join", code, "--join-timeout", "60", env=env)
        join.wait(180)
        host.wait(60)
    finally:
        for node in (host, join):
            if node is not None:
                node.kill()
    assert not live_processes_of(home)
    return World(home, host, join, code, log)


@pytest.fixture(scope="module")
def worlds(tmp_path_factory, warm_cache):
    """The run of a workload, started the first time a test asks for it."""
    made: dict[str, World] = {}

    def world(workload: str) -> World:
        if workload not in made:
            made[workload] = _two_nodes_of_two(tmp_path_factory.mktemp("world"), warm_cache, workload)
        return made[workload]

    return world


@pytest.mark.slow
@pytest.mark.timeout(280)  # below pytest-timeout's 300 s, which ends the whole run on Windows
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_host_and_join_meet_through_stores_that_never_ask_for_libuv(worlds, workload):
    w = worlds(workload)
    host, join = w.host, w.join
    codes = join.proc.returncode, host.proc.returncode
    endings = [(e.get("state"), e.get("summary")) for node in (host, join) for e in node.of(protocol.RUN_FINISHED)]
    assert codes == (0, 0), (endings, join.stderr[-2000:], host.stderr[-2000:])
    assert [state for state, _ in endings] == [protocol.FINISHED] * 2, endings
    stores = _stores(w.log)
    clients = {pid for pid, master, libuv in stores if not master}
    # The joining launcher and the ranks each made a client of the host's store; none asked for libuv.
    assert len(clients) >= 3, stores
    assert not [s for s in stores if s[2] and not s[1]], stores
    assert "use_libuv was requested" not in host.stderr + join.stderr


# Read on Linux only, as in the files they came from (test_nodes_run.py, test_nodes_script.py): not yet
# checked on windows-latest, whose job runs this file's libuv checks on the same runs.
POSIX_READER = pytest.mark.posix_only("moved from the POSIX-only multi-machine files; not yet checked on Windows")


@pytest.fixture
def four(worlds, monkeypatch):
    """The recipe's world of four; its home as this test's DDP Studio home (registry, 'ddpstudio runs')."""
    w = worlds("recipe")
    monkeypatch.setenv("DDPSTUDIO_HOME", str(w.home))
    return w.home, w.host, w.join, w.code


def _trained_as_one_world_of_four(host: Node, join: Node) -> None:
    """What both world-of-four tests first check of the shared recipe run: both nodes finished a world of
    four, ranks 0-1 on the host and 2-3 on the joining node, which trained every step as the loss fell."""
    assert host.proc.returncode == 0, host.stderr
    assert join.proc.returncode == 0, join.stderr
    assert sorted(e.rank for e in host.of(protocol.RANK_STARTED)) == [0, 1]
    assert sorted(e.rank for e in join.of(protocol.RANK_STARTED)) == [2, 3]
    for node in (host, join):
        [done] = node.of(protocol.RUN_FINISHED)
        assert done.get("state") == protocol.FINISHED
        [started] = node.of(protocol.RUN_STARTED)
        assert started.get("world_size") == 4
    losses = [e.get("loss") for e in host.of(protocol.GLOBAL_STEP)]
    assert len(losses) == 4 and losses[-1] < losses[0], losses
    for rank in (2, 3):  # the joining node's ranks trained every step
        assert [e.get("step") for e in join.of(protocol.STEP) if e.rank == rank] == [1, 2, 3, 4]


@pytest.mark.slow
@POSIX_READER
def test_host_and_join_on_one_machine_train_together_and_finish(four):
    home, host, join, code = four
    _trained_as_one_world_of_four(host, join)
    relayed = join.of(protocol.GLOBAL_STEP)  # the host's global loss, relayed through the store
    assert relayed and relayed[-1].get("step") == 4 and {e.get("source") for e in relayed} == {"host"}
    # The token travels in the code and in the launcher's environment, never into the runs' files (which
    # must still be there: the other test of this run deletes it at its end).
    token = joincode.decode(code).token
    files = [path for path in Path(home).rglob("*") if path.is_file()]
    assert any(path.name == "events.jsonl" for path in files), files
    for path in files:
        assert token not in path.read_text(errors="replace"), f"the token leaked into {path}"


@pytest.mark.slow
@POSIX_READER
def test_two_nodes_of_two_ranks_each_make_one_world_of_four(four):
    home, host, join, code = four
    _trained_as_one_world_of_four(host, join)
    # Global rank = node rank x ranks per node + local rank, as the launchers and the ranks' own groups see it.
    for node, node_rank in ((host, 0), (join, 1)):
        joined = sorted((e.rank, e.get("global_rank"), e.get("local_rank"), e.get("group_size"))
                        for e in node.of(protocol.RANK_JOINED))
        assert joined == [(node_rank * 2 + i, node_rank * 2 + i, i, 4) for i in (0, 1)], joined
    # Each node's registry record is marked with its node rank, the host and the host's run id.
    host_id = joincode.decode(code).run_id
    records = {r.node_rank: r for r in registry.load_records()[0]}
    assert sorted(records) == [0, 1] and records[0].run_id == host_id and records[1].run_id != host_id
    for r in records.values():
        assert (r.nodes, r.host_run_id, r.state) == (2, host_id, "finished")
        assert r.host.endswith(" (127.0.0.1)") and r.host == records[0].host, r.host
    # 'ddpstudio runs' lists the run once (both nodes ran here), and deleting it deletes both nodes' folders.
    listed = json.loads(_studio("runs", "--json").stdout)["runs"]
    assert [(e["run_id"], e["nodes"], e["node_ranks"], e["also"]) for e in listed] == \
        [(host_id, 2, [0, 1], [records[1].run_dir])]
    assert "host of 2 machines (nodes 0, 1 here)" in _studio("runs").stdout
    assert _studio("runs", "delete", host_id).returncode == 0
    assert list((Path(home) / "runs").glob("*")) == [] and registry.load_records()[0] == []


@pytest.mark.slow
@POSIX_READER
def test_env_style_script_gets_torchruns_variables_on_each_machine(worlds):
    w = worlds("env-style script")  # env_style.py over 2 nodes x 2 ranks, 4 steps, --show-ranks
    host, join = w.host, w.join
    assert host.proc.returncode == 0, host.stderr
    assert join.proc.returncode == 0, join.stderr
    port = joincode.decode(w.code).port
    [started] = host.of(protocol.RUN_STARTED)  # torchrun's job id is one on every machine: the host's run id
    for node, group in ((host, 0), (join, 1)):
        _finished(node)
        shown = _lines(node, r"^env ")
        assert shown == {2 * group + i: f"env RANK={2 * group + i} LOCAL_RANK={i} WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 "
                                        f"GROUP_RANK={group} MASTER_ADDR=127.0.0.1 MASTER_PORT={port} "
                                        f"GROUP_WORLD_SIZE=2 TORCHELASTIC_RUN_ID={started.get('run_id')} "
                                        "TORCHELASTIC_USE_AGENT_STORE=True torchelastic=True"
                         for i in (0, 1)}, shown
        for rank in shown:  # the script trains on the all-reduced gradient: the loss falls on every rank
            losses = [e.get("loss") for e in node.of(protocol.STEP) if e.rank == rank]
            assert len(losses) == 4 and losses[-1] < losses[0], (rank, losses)


@pytest.mark.slow
def test_a_store_error_that_is_not_the_network_is_said_at_once_without_a_firewall_hint(studio_home):
    # The stand-in refuses every store with a DistStoreError: no connection is ever tried, so retrying until the
    # join timeout and then blaming a firewall (as before issue 19) would only hide it.
    # torch is imported before the clock starts: store.connect imports it lazily, and that import alone took
    # 14-22 s at load 8-10 on a 2-core machine. What is timed is the store's own retrying, or its absence.
    code = ("import time\n"
            "import torch.distributed\n"
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
    result = _studio("host", "--nodes", "2", "--script", str(SCRIPTS / "ddp_env_style.py"), "--script-style", "env",
                     "--no-rank-helper", env={"DDPSTUDIO_PLATFORM": "windows"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ddpstudio: error: --no-rank-helper: on Windows a script's ranks reach the "
                                    "host's store through DDP Studio's rank helper"), result.stderr
