"""Every run folder with the facts a list of runs shows, the disk space it uses, and deleting runs.

A run folder is one with a readable ``plan.json`` under ``paths.runs_dir()``.
Its state comes from ``result.json``, or, while it has none, from the run
registry: "running" while its launcher (pid + create time) is alive, else
"killed" (its launcher is gone without writing a result: killed, as Clean up
says); "unknown" only for a folder the registry does not know (not registered
yet, or copied from elsewhere). A live run is never deleted.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ddpstudio.core import paths
from ddpstudio.core.cleanup import registry
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.metrics import rows
from ddpstudio.core.metrics.history import RunHistory, read_history
from ddpstudio.core.plan import Plan
from ddpstudio.core.process.proctable import ProcTable

RUNNING = "running"
KILLED = "killed"
UNKNOWN = "unknown"
ACCURACY_WORDS = ("acc", "top")


@dataclass(frozen=True)
class BestEval:
    metric: str  # e.g. eval_top1, eval_loss
    value: float


@dataclass(frozen=True)
class RunEntry:
    run_id: str
    run_dir: str
    started: float  # time.time() of the run's start
    duration_s: float | None
    state: str  # finished | failed | stopped | running | killed | unknown
    origin: str  # run | bench
    what: str  # "resnet18 on synthetic data" or the script's name
    world_size: int
    backend: str
    device: str
    batch_size: int | None  # per rank
    effective_batch: int | None
    final_loss: float | None
    best_eval: BestEval | None
    mean_samples_per_s: float | None
    size_bytes: int
    lr: float | None = None  # the learning rate the ranks used (scaled, when asked)
    # A run over several machines (its registry record, docs/multi-machine.md): one entry per run even where
    # several of its nodes ran on this machine (``node_ranks``: theirs here, ``also``: the others' folders).
    nodes: int = 1
    node_ranks: tuple[int, ...] = (0,)
    host: str | None = None
    host_run_id: str | None = None
    also: tuple[str, ...] = ()

    @property
    def machines_text(self) -> str:
        """"" on one machine; "host of 2 machines", "node 1 of 2 machines, host ws-a (192.168.1.20)"."""
        if self.nodes <= 1:
            return ""
        if 0 in self.node_ranks:
            here = f" (nodes {', '.join(map(str, self.node_ranks))} here)" if len(self.node_ranks) > 1 else ""
            return f"host of {self.nodes} machines{here}"
        return f"node {self.node_ranks[0]} of {self.nodes} machines, host {self.host or '?'}"

    @property
    def live(self) -> bool:
        return self.state == RUNNING

    @property
    def started_text(self) -> str:
        """The start as the window shows it: "2026-11-24 04:41" (local time)."""
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.started))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def describe(plan: Plan) -> str:
    if plan.recipe is not None:
        return f"{plan.recipe.model} on {plan.recipe.data} data"
    return Path(plan.script.path).name if plan.script else "?"


def folder_size(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def final_loss(history: RunHistory) -> float | None:
    """The last global mean loss, else the mean of each rank's last loss."""
    track = history.track(rows.GLOBAL_LOSS)
    if track.value:
        return track.value[-1]
    last = [history.track(rows.LOSS, k).value[-1] for k in history.keys(rows.LOSS)]
    return sum(last) / len(last) if last else None


def higher_is_better(metric: str) -> bool:
    return any(word in metric for word in ACCURACY_WORDS)


def best_eval(history: RunHistory) -> BestEval | None:
    """The best accuracy when the run measured one (top-1 first), else the lowest eval loss."""
    evals = [m for m in history.metrics() if m.startswith(rows.EVAL_PREFIX)]
    ranked = sorted(evals, key=lambda m: (not higher_is_better(m), "top5" in m, m))
    for metric in ranked:
        values = history.track(metric).value
        if values:
            return BestEval(metric, max(values) if higher_is_better(metric) else min(values))
    return None


def mean_rate(history: RunHistory) -> float | None:
    values = history.track(rows.SAMPLES_PER_S).value
    return sum(values) / len(values) if values else None


def live_ids() -> dict[str, int]:
    """run id -> launcher pid, for the registry's runs whose launcher is alive."""
    records, _ = registry.load_records()
    running = [r for r in records if not r.ended_state]
    if not running:
        return {}
    table = ProcTable.take()
    return {r.run_id: r.launcher_pid for r in running
            if table.alive(r.launcher_pid, r.launcher_create_time) is not None}


def entry(folder: Path, live: dict[str, int] | None = None,
          records: dict[str, registry.RunRecord] | None = None) -> RunEntry | None:
    """The facts of one run folder; None when it is not one. ``records``: the registry by run id."""
    run = RunDir.at(folder)
    try:
        plan = Plan.read(run.plan)
        mtime = run.plan.stat().st_mtime
    except (OSError, ValueError, TypeError):
        return None
    live = live_ids() if live is None else live
    records = records if records is not None else _records()
    result = run.read_result() or {}
    state = str(result.get("state") or (RUNNING if plan.run_id in live else
                                        KILLED if plan.run_id in records else UNKNOWN))
    history = read_history(folder)
    started = history.t0 or mtime
    duration = result.get("duration_s")
    if duration is None and history.tracks:
        duration = max(t.t[-1] for t in history.tracks.values() if t.t)
    return RunEntry(plan.run_id, str(folder), started, duration, state, getattr(plan, "origin", "run"),
                    describe(plan), result.get("world_size") or plan.world_size, plan.backend, plan.device,
                    plan.recipe.batch_size if plan.recipe else None, plan.effective_batch,
                    final_loss(history), best_eval(history), mean_rate(history), folder_size(folder), plan.lr,
                    **_machines(plan, records.get(plan.run_id)))


def _records() -> dict[str, registry.RunRecord]:
    return {r.run_id: r for r in registry.load_records()[0]}


def _machines(plan: Plan, record: registry.RunRecord | None) -> dict[str, Any]:
    nodes = max(1, getattr(plan, "nodes", 1))
    if nodes == 1:
        return {}
    own = plan.run_id if plan.node_rank == 0 else None
    return {"nodes": nodes, "node_ranks": (plan.node_rank,), "host": record.host if record else None,
            "host_run_id": (record.host_run_id if record else None) or own}


def one_per_run(entries: list[RunEntry]) -> list[RunEntry]:
    """Nodes of one multi-machine run that ran on this machine (a test, or a host that also joined) as one
    entry: the lowest node's, with the others' node ranks and folders (and their disk use) added."""
    groups: dict[str, list[RunEntry]] = {}
    for e in entries:
        if e.nodes > 1 and e.host_run_id:
            groups.setdefault(e.host_run_id, []).append(e)
    merged = {}
    for group in groups.values():
        group.sort(key=lambda e: e.node_ranks[0])
        first, rest = group[0], group[1:]
        merged[first.run_dir] = replace(first, node_ranks=tuple(e.node_ranks[0] for e in group),
                                        also=tuple(e.run_dir for e in rest),
                                        size_bytes=sum(e.size_bytes for e in group))
        merged.update({e.run_dir: None for e in rest})
    return [merged.get(e.run_dir, e) for e in entries if merged.get(e.run_dir, e) is not None]


def list_entries(runs_dir: Path | None = None) -> list[RunEntry]:
    """Every run, newest first."""
    root = runs_dir or paths.runs_dir()
    try:
        folders = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []
    live, records = live_ids(), _records()
    found = [e for e in (entry(p, live, records) for p in folders) if e is not None]
    found.sort(key=lambda e: e.started, reverse=True)
    return one_per_run(found)


def previous_of(entries: list[RunEntry], run_dir: str) -> RunEntry | None:
    """The newest training run of the same model and data that started before this one (a comparison's baseline)."""
    this = next((e for e in entries if Path(e.run_dir) == Path(run_dir)), None)
    if this is None:
        return None
    earlier = [e for e in entries if e.origin == "run" and e.what == this.what and e.started < this.started]
    return max(earlier, key=lambda e: e.started, default=None)


def _same_run(run_ids: list[str], root: Path) -> list[str]:
    """The other nodes on this machine of the multi-machine runs among ``run_ids`` (deleted with them)."""
    records = registry.load_records()[0]
    groups = {r.host_run_id for r in records if r.run_id in run_ids and r.multi_machine and r.host_run_id}
    return [r.run_id for r in records if r.host_run_id in groups and r.run_id not in run_ids
            and (root / r.run_id / "plan.json").is_file()]


class RunsError(Exception):
    """A delete that cannot be done, in words for the user; nothing was deleted."""


class DeleteFailed(RunsError):
    """The files of a run could not all be removed; the message says what was deleted before it."""


def delete_runs(run_ids: list[str], runs_dir: Path | None = None) -> list[str]:
    """Delete these runs' folders and registry records; returns the deleted folders.

    Checks every id first: an unknown id or a live run raises :class:`RunsError` and nothing is deleted.
    """
    root = runs_dir or paths.runs_dir()
    live = live_ids()
    folders = []
    for run_id in dict.fromkeys([*run_ids, *_same_run(run_ids, root)]):
        folder = root / run_id
        if not run_id or Path(run_id).name != run_id or not (folder / "plan.json").is_file():
            raise RunsError(f"no run named {run_id!r} in {root}; 'ddpstudio runs' lists them")
        if run_id in live:
            raise RunsError(f"run {run_id} is still running (launcher pid {live[run_id]}): stop it first, "
                            "then delete it")
        folders.append(folder)
    deleted: list[str] = []
    for folder in folders:
        try:
            shutil.rmtree(folder)
            registry.record_path(folder.name).unlink(missing_ok=True)
        except OSError as exc:
            # On Windows a file another program holds open cannot be deleted (an editor, TensorBoard).
            done = f" (deleted before it: {', '.join(Path(d).name for d in deleted)})" if deleted else ""
            raise DeleteFailed(f"could not delete {folder}: {exc.strerror or exc}; a program may hold one of "
                               f"its files open: close it and try again{done}") from None
        deleted.append(str(folder))
    return deleted
