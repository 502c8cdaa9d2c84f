"""A run's metric history read back from its folder.

``history.jsonl`` (written by the launcher, format in docs/history.md) when
it exists; for a run older than that file, the step, global-step and eval
events of ``events.jsonl`` (no load samples there); for a run no launcher of
ours watched (an exported cluster job, core/jobs), the ranks' own
``events/rank*.jsonl``. A line that is not whole JSON, as a run killed
mid-write leaves at the end, is skipped and counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpstudio.core import protocol
from ddpstudio.core.metrics import rows

EVENTS_FILE = "events.jsonl"
RANK_EVENTS_DIR = "events"  # core/launch/rundir.py RunDir.events_dir: rank<N>.jsonl, one per rank


@dataclass
class Track:
    """One curve: parallel lists, in the order measured."""

    step: list[int | None] = field(default_factory=list)
    t: list[float] = field(default_factory=list)  # seconds since the run started
    value: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.value)


@dataclass
class RunHistory:
    header: dict[str, Any]
    tracks: dict[tuple[str, int | None], Track] = field(default_factory=dict)
    skipped: int = 0  # lines that could not be read (a torn last line)
    source: str = rows.FILE_NAME  # or "events.jsonl" for runs older than the history file

    def add(self, item: list) -> None:
        metric, key, step, t, value = item
        track = self.tracks.setdefault((metric, key), Track())
        track.step.append(step)
        track.t.append(float(t))
        track.value.append(float(value))

    def track(self, metric: str, key: int | None = None) -> Track:
        """The curve, empty when the run never measured it."""
        return self.tracks.get((metric, key)) or Track()

    def keys(self, metric: str) -> list[int]:
        """The ranks or GPUs ``metric`` was measured for."""
        return sorted(k for m, k in self.tracks if m == metric and k is not None)

    def metrics(self) -> list[str]:
        return sorted({m for m, _ in self.tracks})

    @property
    def t0(self) -> float:
        return float(self.header.get("t0") or 0.0)

    @property
    def effective_batch(self) -> int | None:
        value = self.header.get("effective_batch")
        return int(value) if isinstance(value, (int, float)) and value else None


def _lines(path: Path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        yield from fh


def read_history(run_dir: str | Path) -> RunHistory:
    """The history of the run in ``run_dir``; an empty one when the folder holds neither file."""
    run_dir = Path(run_dir)
    path = run_dir / rows.FILE_NAME
    if not path.exists():
        merged = run_dir / EVENTS_FILE
        ranks = sorted((run_dir / RANK_EVENTS_DIR).glob("rank*.jsonl"))
        return _from_rank_events(ranks) if ranks and not merged.exists() else _from_events(merged)
    history: RunHistory | None = None
    skipped = 0
    try:
        for line in _lines(path):
            try:
                raw = json.loads(line)
            except ValueError:
                skipped += 1
                continue
            if history is None:
                if isinstance(raw, dict) and raw.get("history"):
                    history = RunHistory(raw)
                    continue
                history = RunHistory({})
            item = rows.parse_row(raw)
            if item is None:
                skipped += 1
            else:
                history.add(item)
    except OSError:
        pass
    history = history or RunHistory({})
    history.skipped = skipped
    return history


def _from_events(path: Path) -> RunHistory:
    history = RunHistory({}, source=EVENTS_FILE)
    parser = protocol.EventParser()
    t0: float | None = None
    try:
        for line in _lines(path):
            for event in parser.feed(line):
                if event.type == protocol.RUN_STARTED and t0 is None:
                    t0 = event.t
                    history.header = rows.header(
                        run_id=str(event.get("run_id", "")), t0=t0, world_size=int(event.get("world_size") or 0),
                        effective_batch=event.get("effective_batch"), backend=event.get("backend"),
                        device=event.get("device"))
                for item in rows.event_rows(event, t0 if t0 is not None else event.t):
                    history.add(item)
    except OSError:
        pass
    return history


def _from_rank_events(paths: list[Path]) -> RunHistory:
    """The ranks' own event files, merged by time; the run started at the earliest event (no launcher
    wrote a ``run_started``: torchrun started the ranks)."""
    events = []
    for path in paths:
        parser = protocol.EventParser()
        try:
            for line in _lines(path):
                events.extend(parser.feed(line))
        except OSError:
            continue
    history = RunHistory({}, source=RANK_EVENTS_DIR)
    if not events:
        return history
    events.sort(key=lambda e: e.t)
    t0 = events[0].t
    history.header = rows.header(run_id="", t0=t0, world_size=len(paths), effective_batch=None)
    for event in events:
        for item in rows.event_rows(event, t0):
            history.add(item)
    return history
