"""Writes protocol events from inside a rank to its own events file.

The launcher sets ``DDPSTUDIO_EVENTS_DIR``; each rank appends JSON lines to
``rank<RANK>.jsonl`` there and the launcher tails and merges them. Without
the variable (a script run by hand, or under plain torchrun) nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TextIO

from ddpstudio.core.protocol import EVENTS_DIR_ENV, make_event


def events_file(events_dir: str | os.PathLike, rank: int) -> Path:
    return Path(events_dir) / f"rank{rank}.jsonl"


def spawned_events_file(events_dir: str | os.PathLike) -> Path | None:
    """Spawn style: a rank the script started itself writes ``child-<pid>.jsonl`` (rank/spawnchild.py)."""
    if os.environ.get("DDPSTUDIO_SPAWN_CHILD") != str(os.getpid()):  # spawnchild.CHILD_ENV
        return None
    return Path(events_dir) / f"child-{os.getpid()}.jsonl"


class Emitter:
    """Appends events for one rank; every line is flushed so the launcher sees it at once."""

    def __init__(self, rank: int, events_dir: str | None = None) -> None:
        self.rank = rank
        self._dir = events_dir if events_dir is not None else os.environ.get(EVENTS_DIR_ENV)
        self._fh: TextIO | None = None
        self._pid = os.getpid()
        if self._dir:
            self._open()

    def _open(self) -> None:
        path = spawned_events_file(self._dir) or events_file(self._dir, self.rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(path, "a", encoding="utf-8", buffering=1)

    @property
    def enabled(self) -> bool:
        return self._fh is not None

    def emit(self, type_: str, rank: int | None | bool = True, **data: Any) -> None:
        """Write one event; ``rank=True`` tags it with this rank, ``None`` leaves it untagged."""
        if self._fh is None:
            return
        if self._pid != os.getpid():  # a forked process: a spawned rank of its own has its own file (spawnchild.py)
            self._pid = os.getpid()
            self._fh.close()
            self._open()
        tag = self.rank if rank is True else rank
        self._fh.write(make_event(type_, rank=tag, **data).to_line() + "\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def rank_from_env() -> int:
    return int(os.environ.get("RANK", "0"))
