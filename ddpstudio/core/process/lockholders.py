"""Which processes have a given file open.

On Windows an open FileStore file cannot be deleted, and a surviving rank
keeps it open: that is the "lock". On Windows we ask the Restart Manager
(:mod:`restartmgr`), which names holders of other users too; elsewhere
psutil's ``open_files``, which skips processes we may not inspect. Either
sees only handles open at that instant (torch opens the store per
operation), so cleanup decides "ours" from the registry and live pids, and
this names who blocks a delete.
"""

from __future__ import annotations

import os
from typing import Iterable

import psutil

from ddpstudio.core.platform import Platform, current


def norm(path: str) -> str:
    """One spelling per file: absolute, symlinks resolved, case folded where the OS folds it."""
    return os.path.normcase(os.path.realpath(path))


def holders(paths: Iterable[str], platform: Platform | None = None) -> list[tuple[int, str]]:
    """``(pid, path)`` for every process (except this one) with one of ``paths`` open."""
    if (platform or current()).is_windows:
        from ddpstudio.core.process import restartmgr

        me = os.getpid()
        return [(pid, path) for pid, path in restartmgr.holders(list(paths)) if pid != me]
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
