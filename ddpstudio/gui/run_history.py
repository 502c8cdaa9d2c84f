"""Past runs, read back from their run directories (plan.json, result.json, events.jsonl)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddpstudio.core import paths, protocol
from ddpstudio.core.plan import Plan
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.metrics.catalog import describe
from ddpstudio.core.metrics.history import RunHistory, read_history
from ddpstudio.gui.form_state import SetupState, from_plan
from ddpstudio.gui.load_history import LoadHistory
from ddpstudio.gui.preflight import SETUP_FILE
from ddpstudio.gui.run_metrics import POINTS, RunMetrics

MAX_LOG_LINES = 20000


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    run_dir: str
    started: float  # time.time() of the plan file
    state: str  # finished | failed | stopped | unknown (no result: running, or the launcher was killed)
    what: str
    world_size: int
    duration_s: float | None

    @property
    def started_text(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.started))


@dataclass
class LoadedRun:
    summary: RunSummary
    plan: Plan
    setup: SetupState
    metrics: RunMetrics
    logs: list[tuple[int | None, str, str]] = field(default_factory=list)  # (rank, stream, line)
    history: RunHistory | None = None  # everything it measured (history.jsonl)
    load: LoadHistory | None = None  # its load and memory curves, from the history


def summarize(run_dir: Path) -> RunSummary | None:
    run = RunDir.at(run_dir)
    try:
        plan = Plan.read(run.plan)
        started = run.plan.stat().st_mtime
    except (OSError, ValueError, TypeError):
        return None
    result = run.read_result() or {}
    return RunSummary(plan.run_id, str(run_dir), started, str(result.get("state") or "unknown"),
                      describe(plan), result.get("world_size") or plan.world_size, result.get("duration_s"))


def list_runs(runs_dir: Path | None = None, limit: int = 500) -> list[RunSummary]:
    """The newest ``limit`` runs, newest first; folders that are not runs are skipped."""
    root = runs_dir or paths.runs_dir()
    try:
        folders = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []
    runs = [s for s in (summarize(p) for p in folders) if s is not None]
    runs.sort(key=lambda s: s.started, reverse=True)
    return runs[:limit]


def load_run(run_dir: str | Path, capacity: int = POINTS) -> LoadedRun:
    """Everything the window shows of a past run; reads the merged events once."""
    run = RunDir.at(run_dir)
    summary = summarize(run.root)
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
