"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ddpstudio.core.platform import Platform, current

# Windows: os.replace is MoveFileExW(MOVEFILE_REPLACE_EXISTING) (CPython Modules/posixmodule.c,
# internal_rename), which fails with ERROR_ACCESS_DENIED (WinError 5) or ERROR_SHARING_VIOLATION
# (32), both PermissionError, while another process has the target open without FILE_SHARE_DELETE
# (an antivirus scan, the search indexer, a reader of ours: CPython's open() shares read and write
# only). Such holds last milliseconds, so Windows programs retry; a longer one is reported, named.
REPLACE_PATIENCE_S = 2.0
REPLACE_RETRY_S = 0.05


def replace(src: str | os.PathLike, dst: str | os.PathLike, platform: Platform | None = None,
            patience_s: float = REPLACE_PATIENCE_S) -> None:
    """``os.replace(src, dst)``; on Windows retried for ``patience_s`` while the target is held open.

    Elsewhere a PermissionError is not transient (a permission), so it is raised at once."""
    if not (platform or current()).is_windows:
        os.replace(src, dst)
        return
    deadline = time.monotonic() + patience_s
    while True:
        try:
            os.replace(src, dst)
            return
        except PermissionError as exc:
            if time.monotonic() >= deadline:
                raise PermissionError(exc.errno, f"could not replace {os.fspath(dst)}: another program kept it "
                                                 f"open for {patience_s:g} s ({exc.strerror or exc})",
                                      os.fspath(dst)) from exc
            time.sleep(REPLACE_RETRY_S)


def write_text(path: str | os.PathLike, text: str, platform: Platform | None = None) -> Path:
    """Write to a temp file beside ``path`` and rename it over; the pid keeps concurrent writers apart."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        replace(tmp, path, platform)
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


def write_json(path: str | os.PathLike, data: Any, indent: int | None = 2, platform: Platform | None = None) -> Path:
    return write_text(path, json.dumps(data, indent=indent), platform)
