"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write to a temp file beside ``path`` and rename it over; the pid keeps concurrent writers apart."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def overwrite_in_place(path: str | os.PathLike, text: str) -> Path:
    """Rewrite an existing small file in its own blocks: the fallback when a full disk refuses a temp file.

    Not atomic (a crash mid-write leaves a damaged file, which readers must
    already survive), but it needs no new block when the text fits the old ones.
    """
    path = Path(path)
    with open(path, "r+b") as fh:
        fh.write(text.encode("utf-8"))
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())
    return path


def write_json(path: str | os.PathLike, data: Any, indent: int | None = 2) -> Path:
    return write_text(path, json.dumps(data, indent=indent))
