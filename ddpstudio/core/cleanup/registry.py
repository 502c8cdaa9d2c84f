"""The run registry: one JSON record per launch, the source of truth for "ours".

Each record names the launcher and every rank by pid *and* create time, so a
pid that the OS has since handed to another program is never taken for ours.
The launcher writes the record before it spawns a rank and after each one
(``record_start``), and the final state when the run ends (``record_end``).
Writes are atomic (temp file + ``os.replace``); a record that cannot be read
is reported as a :class:`CorruptRecord` and skipped, never raised.
"""

from __future__ import annotations

import errno
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ddpstudio.core import paths
from ddpstudio.core.protocol import Outcome
from ddpstudio.core.atomic import overwrite_in_place, write_json

SCHEMA_VERSION = 1
RUNNING = "running"
ENDED_STATES = tuple(str(o) for o in Outcome)  # finished, failed, stopped, nothing_trained, not_distributed
STATES = (RUNNING, *ENDED_STATES)


@dataclass(frozen=True)
class RankRecord:
    rank: int
    pid: int
    create_time: float | None


@dataclass
class RunRecord:
    run_id: str
    run_dir: str
    launcher_pid: int
    launcher_create_time: float | None
    started: float
    ranks: list[RankRecord] = field(default_factory=list)
    store_path: str | None = None
    store_is_fixed: bool = False
    port: int | None = None
    state: str = RUNNING
    ended: float | None = None
    note: str | None = None
    # A run over several machines has one record on each (docs/multi-machine.md): this machine's node rank,
    # the host machine ("hostname (address)") and the run's id on the host, the same on every machine.
    nodes: int = 1
    node_rank: int = 0
    host: str | None = None
    host_run_id: str | None = None
    # A user's script that makes its own FileStore (``init_method="file://..."`` in its code): the script and
    # the store files its ranks said they meet on (rank/script_hooks.py), kept like the run's own store.
    script: str | None = None
    script_stores: list[str] = field(default_factory=list)

    @property
    def stores(self) -> list[str]:
        """Every FileStore path the run used: its own (when it had one) and its script's."""
        return ([self.store_path] if self.store_path else []) + list(self.script_stores)

    @property
    def ended_state(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def multi_machine(self) -> bool:
        return self.nodes > 1

    def to_dict(self) -> dict[str, Any]:
        return {"version": SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, raw: Any) -> "RunRecord":
        """Raises ``ValueError`` (with the reason) for anything that is not a usable record."""
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        try:
            ranks = [RankRecord(int(r["rank"]), int(r["pid"]), _time(r.get("create_time")))
                     for r in raw.get("ranks") or []]
            record = cls(
                run_id=str(raw["run_id"]), run_dir=str(raw["run_dir"]),
                launcher_pid=int(raw["launcher_pid"]), launcher_create_time=_time(raw.get("launcher_create_time")),
                started=float(raw["started"]), ranks=ranks, store_path=raw.get("store_path"),
                store_is_fixed=bool(raw.get("store_is_fixed")), port=raw.get("port"),
                state=str(raw.get("state", RUNNING)), ended=_time(raw.get("ended")), note=raw.get("note"),
                nodes=int(raw.get("nodes") or 1), node_rank=int(raw.get("node_rank") or 0),
                host=_text(raw.get("host")), host_run_id=_text(raw.get("host_run_id")),
                script=_text(raw.get("script")), script_stores=[str(p) for p in raw.get("script_stores") or []])
        except KeyError as exc:
            raise ValueError(f"missing field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad field value ({exc})") from None
        if record.state not in STATES:
            raise ValueError(f"unknown state {record.state!r}")
        if record.store_path is not None and not isinstance(record.store_path, str):
            raise ValueError("store_path is not a string")
        return record


@dataclass(frozen=True)
class CorruptRecord:
    path: str
    reason: str

    @property
    def run_id(self) -> str:
        return Path(self.path).stem


def _time(value: Any) -> float | None:
    return None if value is None else float(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def record_path(run_id: str) -> Path:
    return paths.registry_dir() / f"{run_id}.json"


def write_record(record: RunRecord) -> Path:
    """Write atomically: a reader sees the old record or the new one, never half of one.

    On a full disk an existing record is rewritten in place instead, so a run
    that ended there is not left marked "running".
    """
    path = record_path(record.run_id)
    try:
        return write_json(path, record.to_dict())
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not path.is_file():
            raise
        return overwrite_in_place(path, json.dumps(record.to_dict(), indent=2))


def record_start(run_id: str, *, run_dir: str, launcher_pid: int, launcher_create_time: float | None,
                 ranks: list[RankRecord] | None = None, store_path: str | None = None,
                 store_is_fixed: bool = False, port: int | None = None,
                 started: float | None = None, nodes: int = 1, node_rank: int = 0, host: str | None = None,
                 host_run_id: str | None = None, script: str | None = None,
                 script_stores: list[str] | None = None) -> RunRecord:
    """Record a run as running (again after each spawned rank: the record grows with the run).
    ``nodes``..``host_run_id``: this machine's part of a multi-machine run (see :class:`RunRecord`)."""
    record = RunRecord(run_id=run_id, run_dir=str(run_dir), launcher_pid=launcher_pid,
                       launcher_create_time=launcher_create_time,
                       started=time.time() if started is None else started, ranks=list(ranks or []),
                       store_path=store_path, store_is_fixed=store_is_fixed, port=port, nodes=nodes,
                       node_rank=node_rank, host=host, host_run_id=host_run_id, script=script,
                       script_stores=list(script_stores or []))
    write_record(record)
    return record


def read_record(path: str | os.PathLike) -> RunRecord:
    """One record; raises ``ValueError`` or ``OSError`` when it cannot be read."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): "
                         "half-written or damaged") from None
    return RunRecord.from_dict(raw)


def record_end(run_id: str, state: str, note: str | None = None) -> RunRecord | None:
    """Mark a run ended. ``None`` (and nothing written) when its record is missing or unreadable."""
    if state not in ENDED_STATES:
        raise ValueError(f"an ended run is {', '.join(ENDED_STATES)}, not {state!r}")
    try:
        record = read_record(record_path(run_id))
    except (OSError, ValueError):
        return None
    record.state, record.ended = state, time.time()
    if note:
        record.note = note
    write_record(record)
    return record


def load_records() -> tuple[list[RunRecord], list[CorruptRecord]]:
    """Every record, oldest first, and the ones that could not be read (with why)."""
    folder = paths.registry_dir()
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except FileNotFoundError:
        return [], []
    except OSError as exc:  # a file where the folder should be, or a folder we may not read
        return [], [CorruptRecord(str(folder), f"the registry cannot be listed ({exc.strerror or exc}); "
                                               "its runs are not checked")]
    records, corrupt = [], []
    for path in files:
        try:
            record = read_record(path)
        except FileNotFoundError:
            continue  # removed between listing and reading
        except (OSError, ValueError) as exc:
            corrupt.append(CorruptRecord(str(path), str(exc)))
            continue
        if record.run_id != path.stem:
            corrupt.append(CorruptRecord(str(path), f"names run {record.run_id!r}, not {path.stem!r}"))
            continue
        records.append(record)
    records.sort(key=lambda r: r.started)
    return records, corrupt
