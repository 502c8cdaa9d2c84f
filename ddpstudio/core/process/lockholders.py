"""Which processes have a given file open.

On Windows an open FileStore file cannot be deleted, and a surviving rank
keeps it open: that is the "lock". psutil's ``open_files`` reads it on every
platform; processes we may not inspect (other users, protected ones) are
skipped, so a holder running as another user can go unseen.
"""

from __future__ import annotations

import os
from typing import Iterable

import psutil


def norm(path: str) -> str:
    """One spelling per file: absolute, symlinks resolved, case folded where the OS folds it."""
    return os.path.normcase(os.path.realpath(path))


def holders(paths: Iterable[str]) -> list[tuple[int, str]]:
    """``(pid, path)`` for every process (except this one) with one of ``paths`` open."""
    wanted = {norm(p): p for p in paths}
    if not wanted:
        return []
    me = os.getpid()
    found: list[tuple[int, str]] = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            files = proc.open_files()
        except (psutil.Error, OSError):
            continue
        seen: set[str] = set()
        for f in files:
            # psutil reports the resolved path; only the case may differ (Windows).
            key = os.path.normcase(f.path)
            if key in wanted and key not in seen:
                seen.add(key)
                found.append((proc.pid, wanted[key]))
    return found
