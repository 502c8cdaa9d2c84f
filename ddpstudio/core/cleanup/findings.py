"""What a leftover scan found and what a cleanup did: plain, JSON-able values for every front end."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ddpstudio.core.cleanup.registry import CorruptRecord


@dataclass
class ProcessInfo:
    pid: int
    name: str
    cmdline: str
    run_id: str | None = None
    rank: int | None = None
    ours: bool = False
    path: str | None = None  # the run's store (orphans) or the store file held open (lock holders)
    create_time: float | None = None  # with the pid, what makes it *this* process

    def describe(self) -> str:
        who = f"pid {self.pid} ({self.name})"
        if self.ours and self.run_id:
            who += f", rank {self.rank} of run {self.run_id}" if self.rank is not None else f", of run {self.run_id}"
        return who

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StaleStore:
    path: str
    reason: str
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Findings:
    stale_stores: list[StaleStore] = field(default_factory=list)
    orphans: list[ProcessInfo] = field(default_factory=list)
    lock_holders: list[ProcessInfo] = field(default_factory=list)
    corrupt_records: list[CorruptRecord] = field(default_factory=list)
    live_stores: dict[str, str] = field(default_factory=dict)  # store path -> id of the live run using it
    dead_runs: list[str] = field(default_factory=list)  # recorded as running, but the launcher is gone

    @property
    def foreign(self) -> list[ProcessInfo]:
        """Processes holding a stale store open that DDP Studio did not start."""
        return [p for p in self.lock_holders if not p.ours]

    @property
    def empty(self) -> bool:
        return not (self.stale_stores or self.orphans or self.lock_holders or self.corrupt_records)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stale_stores": [s.to_dict() for s in self.stale_stores],
            "orphans": [p.to_dict() for p in self.orphans],
            "lock_holders": [p.to_dict() for p in self.lock_holders],
            "foreign": [p.to_dict() for p in self.foreign],
            "corrupt_records": [asdict(c) for c in self.corrupt_records],
            "live_stores": dict(self.live_stores),
            "dead_runs": list(self.dead_runs),
            "empty": self.empty,
        }


@dataclass
class CleanReport:
    killed: list[ProcessInfo] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    left: list[tuple[str, str]] = field(default_factory=list)  # (what, why)
    dry_run: bool = False
    moved: list[tuple[str, str]] = field(default_factory=list)  # corrupt records set aside: (from, to)
    marked: list[str] = field(default_factory=list)  # killed runs whose record now says "failed"
    forced: list[int] = field(default_factory=list)  # pids of ``killed`` that ignored the request and were killed

    def ended_politely(self) -> list[ProcessInfo]:
        """The processes that ended when asked (SIGTERM): "stopped"."""
        return [p for p in self.killed if p.pid not in self.forced]

    def ended_by_force(self) -> list[ProcessInfo]:
        """The processes that had to be killed (SIGKILL; on Windows every TerminateProcess): "killed"."""
        return [p for p in self.killed if p.pid in self.forced]

    @property
    def nothing_done(self) -> bool:
        return not (self.killed or self.deleted or self.moved)

    def summary(self) -> str:
        """One paragraph for a person: what was (or would be) done, and what was left and why."""
        would = self.dry_run
        parts = []
        if would and self.killed:
            pids = ", ".join(str(p.pid) for p in self.killed)
            parts.append(f"Would stop {_n(len(self.killed), 'process', 'processes')} (pid {pids}).")
        elif self.killed:
            for procs, done, how in ((self.ended_politely(), "Stopped", "ended when asked"),
                                     (self.ended_by_force(), "Killed", "did not end when asked")):
                if procs:
                    pids = ", ".join(str(p.pid) for p in procs)
                    parts.append(f"{done} {_n(len(procs), 'process', 'processes')} (pid {pids}; {how}).")
        if self.deleted:
            parts.append(f"{'Would delete' if would else 'Deleted'} {_n(len(self.deleted), 'stale store file')}: "
                         f"{', '.join(self.deleted)}.")
        if self.moved:
            parts.append(f"{'Would move' if would else 'Moved'} {_n(len(self.moved), 'corrupt registry record')} "
                         f"aside to {os.path.dirname(self.moved[0][1])}.")
        if self.left:
            items = "; ".join(f"{what}: {why}" for what, why in self.left)
            parts.append(f"{'Would leave' if would else 'Left'} {_n(len(self.left), 'item')}: {items}.")
        if not parts:
            return "Nothing to clean up."
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"killed": [p.to_dict() for p in self.killed], "deleted": list(self.deleted),
                "left": [list(x) for x in self.left], "dry_run": self.dry_run,
                "moved": [list(x) for x in self.moved], "marked": list(self.marked), "forced": list(self.forced),
                "summary": self.summary()}


@dataclass
class PrelaunchResult:
    ok: bool
    cleaned: list[str] = field(default_factory=list)  # store files removed (our own leftovers)
    message: str = ""
    killed: list[ProcessInfo] = field(default_factory=list)  # our orphaned ranks stopped to free the file

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "cleaned": list(self.cleaned), "message": self.message,
                "killed": [p.to_dict() for p in self.killed]}


def _n(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"
