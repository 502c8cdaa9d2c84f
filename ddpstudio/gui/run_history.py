"""A past run read back from its folder (plan.json, result.json, events.jsonl) for the window to show.

The list of runs and each run's facts come from ``core.metrics.catalog`` (the
Runs tab and ``ddpstudio runs`` read the same records)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ddpstudio.core import protocol
from ddpstudio.core.plan import Plan
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.metrics.catalog import RunEntry, entry
from ddpstudio.core.metrics.history import RunHistory, read_history
from ddpstudio.gui.form_state import SetupState, from_plan
from ddpstudio.gui.load_history import LoadHistory
from ddpstudio.gui.preflight import SETUP_FILE
from ddpstudio.gui.run_metrics import POINTS, RunMetrics

MAX_LOG_LINES = 20000


@dataclass
class LoadedRun:
    summary: RunEntry  # the same facts the Runs list shows (core.metrics.catalog.entry)
    plan: Plan
    setup: SetupState
    metrics: RunMetrics
    logs: list[tuple[int | None, str, str]] = field(default_factory=list)  # (rank, stream, line)
    history: RunHistory | None = None  # everything it measured (history.jsonl)
    load: LoadHistory | None = None  # its load and memory curves, from the history


def load_run(run_dir: str | Path, capacity: int = POINTS) -> LoadedRun:
    """Everything the window shows of a past run; reads the merged events once."""
    run = RunDir.at(run_dir)
    summary = entry(run.root)
    if summary is None:
        raise ValueError(f"{run_dir} is not a run folder (no readable plan.json)")
    plan = Plan.read(run.plan)
    metrics, logs = RunMetrics(capacity), []
    parser = protocol.EventParser()
    try:
        with open(run.merged_events, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                for event in parser.feed(line):
                    metrics.feed(event)
                    if event.type == protocol.LOG:
                        logs.append((event.rank, str(event.get("stream", "")), str(event.get("line", ""))))
    except OSError:
        pass
    history = read_history(run.root)
    return LoadedRun(summary, plan, load_setup(run.root, plan), metrics, logs[-MAX_LOG_LINES:], history,
                     LoadHistory.from_history(history))


def load_setup(run_dir: Path, plan: Plan) -> SetupState:
    try:
        return SetupState.from_dict(json.loads((run_dir / SETUP_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return from_plan(plan)
