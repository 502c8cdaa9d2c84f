"""The last resort when a launcher does not stop in time: end what its run recorded.

The launcher writes ``processes.json`` (pid plus create time of itself and of
every rank); only processes whose create time still matches are ended, so a
reused pid is never mistaken for ours. Children of the ranks (DataLoader
workers) go with them.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil

from ddpstudio.core.launch.rundir import RunDir


def recorded(run_dir: str | Path) -> list[psutil.Process]:
    """The run's launcher and ranks that are still alive, with their descendants."""
    try:
        raw = json.loads(RunDir.at(run_dir).processes.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    entries = [raw.get("launcher") or {}, *(raw.get("ranks") or [])]
    found: dict[int, psutil.Process] = {}
    for entry in entries:
        pid, created = entry.get("pid"), entry.get("create_time")
        if not isinstance(pid, int):
            continue
        try:
            proc = psutil.Process(pid)
            if created is not None and abs(proc.create_time() - created) > 0.01:
                continue
            for p in [proc, *proc.children(recursive=True)]:
                found[p.pid] = p
        except psutil.Error:
            continue
    return list(found.values())


def kill_recorded(run_dir: str | Path) -> list[int]:
    """Kill what :func:`recorded` finds; returns the pids that were sent SIGKILL."""
    killed = []
    for proc in recorded(run_dir):
        try:
            proc.kill()
            killed.append(proc.pid)
        except psutil.Error:
            continue
    return killed
