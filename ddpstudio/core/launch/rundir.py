"""The layout of a run directory: plan, per-rank logs and events, merged events, result."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpstudio.core.atomic import write_json
from ddpstudio.core.launch.diskguard import DiskProblem


@dataclass(frozen=True)
class RunDir:
    root: Path

    @classmethod
    def at(cls, path: str | os.PathLike) -> "RunDir":
        return cls(Path(path))

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def events_dir(self) -> Path:
        return self.root / "events"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def merged_events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def result(self) -> Path:
        return self.root / "result.json"

    @property
    def rank_stop_file(self) -> Path:
        """The launcher creates this to ask its ranks to stop (they watch it: rank/stopwatch.py)."""
        return self.root / "stop-ranks"

    @property
    def stop_file(self) -> Path:
        """Create this file to ask the launcher to stop the run."""
        return self.root / "STOP"

    @property
    def processes(self) -> Path:
        return self.root / "processes.json"

    def stdout(self, rank: int) -> Path:
        return self.logs_dir / f"rank{rank}.out.log"

    def stderr(self, rank: int) -> Path:
        return self.logs_dir / f"rank{rank}.err.log"

    def error_file(self, rank: int, attempt: int = 0) -> Path:
        """Where a script's ``@record`` main writes its failure (TORCHELASTIC_ERROR_FILE; one per start)."""
        return self.logs_dir / f"rank{rank}.error{attempt}.json"

    def rank_events(self, rank: int) -> Path:
        return self.events_dir / f"rank{rank}.jsonl"

    def create(self) -> None:
        for folder in (self.root, self.events_dir, self.logs_dir):
            folder.mkdir(parents=True, exist_ok=True)

    def write_json(self, path: Path, data: Any) -> DiskProblem | None:
        """Write atomically; a full or read-only disk is returned (not raised), other errors raise."""
        try:
            write_json(path, data)
        except OSError as exc:
            problem = DiskProblem.of(exc, self.root)
            if problem is None:
                raise
            return problem
        return None

    def read_result(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.result.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
