"""'ddpstudio clean' on one machine of a multi-machine run: its record (node rank, host) is this machine's
part, and an orphaned rank of it (global rank 2 and 3 of node 1) is found and stopped like a local run's."""

from __future__ import annotations

import json

import pytest

from ddpstudio.core.cleanup import registry
from ddpstudio.core.cleanup.registry import RankRecord
from ddpstudio.core.process.proctable import create_time
from tests.studio import ddpstudio
from tests.test_hygiene import DEAD_PID, alive, procs  # noqa: F401  (procs is a fixture)

HOST = "ws-a (192.168.1.20)"


@pytest.mark.slow
def test_an_orphaned_rank_of_a_joining_machine_is_found_and_stopped_like_a_local_one(procs):  # noqa: F811
    ranks = [procs(), procs()]
    registry.record_start("r-node1", run_dir="/runs/r-node1", launcher_pid=DEAD_PID, launcher_create_time=1.0,
                          ranks=[RankRecord(2 + i, p.pid, create_time(p.pid)) for i, p in enumerate(ranks)],
                          port=29500, nodes=2, node_rank=1, host=HOST, host_run_id="r-host")
    found = json.loads(ddpstudio("clean", "--dry-run", "--json", timeout=60).stdout)["findings"]
    assert sorted((o["run_id"], o["rank"], o["pid"]) for o in found["orphans"]) == \
        [("r-node1", 2, ranks[0].pid), ("r-node1", 3, ranks[1].pid)]
    assert found["dead_runs"] == ["r-node1"]
    done = json.loads(ddpstudio("clean", "--yes", "--json", timeout=60).stdout)["report"]
    assert sorted(p["pid"] for p in done["killed"]) == sorted(p.pid for p in ranks) and done["marked"] == ["r-node1"]
    assert not any(alive(p) for p in ranks)
    assert json.loads(ddpstudio("clean", "--dry-run", "--json", timeout=60).stdout)["findings"]["empty"]
    [record] = registry.load_records()[0]
    assert (record.state, record.nodes, record.node_rank, record.host, record.host_run_id) == \
        ("failed", 2, 1, HOST, "r-host")  # the end was recorded without losing the machine's part


def test_a_record_written_before_multi_machine_runs_reads_as_one_machine():
    old = {"version": 1, "run_id": "r-old", "run_dir": "/runs/r-old", "launcher_pid": 1, "launcher_create_time": 1.0,
           "started": 1.0, "ranks": [], "state": "finished"}
    record = registry.RunRecord.from_dict(old)
    assert (record.nodes, record.node_rank, record.host, record.host_run_id, record.multi_machine) == \
        (1, 0, None, None, False)
