"""The Runs panel marks a multi-machine run with its place: the host's row, a joining machine's row."""

from __future__ import annotations

from dataclasses import replace

from ddpstudio.core.metrics.catalog import RunEntry, one_per_run
from ddpstudio.gui.runs_panel import COLUMNS, RunsPanel
from ddpstudio.gui.workers import Workers

WHAT = COLUMNS.index("What")


def _entry(run_id: str, started: float, **machines) -> RunEntry:
    return RunEntry(run_id, f"/runs/{run_id}", started, 12.0, "finished", "run", "resnet18 on synthetic data",
                    4, "gloo", "cpu", 8, 32, 1.5, None, 90.0, 1000, **machines)


def test_one_row_per_multi_machine_run_marked_with_node_and_host(qtbot):
    host = _entry("r-host", 300.0, nodes=2, node_ranks=(0,), host="ws-a (10.0.0.1)", host_run_id="r-host")
    local_join = _entry("r-join", 301.0, nodes=2, node_ranks=(1,), host="ws-a (10.0.0.1)", host_run_id="r-host")
    elsewhere = _entry("r-node", 200.0, nodes=3, node_ranks=(2,), host="ws-c (10.0.0.3)", host_run_id="r-other")
    single = _entry("r-one", 100.0)
    runs = one_per_run([local_join, host, elsewhere, single])
    assert runs == [replace(host, node_ranks=(0, 1), also=("/runs/r-join",), size_bytes=2000), elsewhere, single]
    panel = RunsPanel(Workers())
    qtbot.addWidget(panel)
    panel.show_runs(runs)
    shown = [panel.tree.topLevelItem(i).text(WHAT) for i in range(panel.tree.topLevelItemCount())]
    assert shown == ["resnet18 on synthetic data, host of 2 machines (nodes 0, 1 here)",
                     "resnet18 on synthetic data, node 2 of 3 machines, host ws-c (10.0.0.3)",
                     "resnet18 on synthetic data"]
