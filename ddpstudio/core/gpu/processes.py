"""CPU load and resident memory of the processes the caller watches (the ranks).

psutil's ``cpu_percent()`` measures since its previous call on the same
``Process`` object, so the objects are kept between samples, keyed by pid
plus create time: a reused pid starts afresh instead of inheriting a dead
rank's reading. Processes that are gone, or that we may not read, are dropped.
"""

from __future__ import annotations

from typing import Iterable

import psutil

from .model import MIB, ProcessSample



class ProcessMeter:
    """Samples per-process CPU% and RSS; one instance per sampler (not thread-safe)."""

    def __init__(self) -> None:
        self._procs: dict[tuple[int, float], psutil.Process] = {}

    def sample(self, pids: Iterable[int]) -> tuple[ProcessSample, ...]:
        out: list[ProcessSample] = []
        kept: dict[tuple[int, float], psutil.Process] = {}
        for pid in sorted(set(pids)):
            try:
                key, proc = self._process(pid)
                with proc.oneshot():
                    cpu = proc.cpu_percent(interval=None)  # 0.0 the first time for this process
                    rss = proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):  # ZombieProcess is a NoSuchProcess
                continue
            kept[key] = proc
            out.append(ProcessSample(pid=pid, cpu_pct=cpu, rss_mb=rss / MIB))
        self._procs = kept  # forget processes that vanished or are no longer watched
        return tuple(out)

    def _process(self, pid: int) -> tuple[tuple[int, float], psutil.Process]:
        proc = psutil.Process(pid)
        key = (pid, proc.create_time())
        return key, self._procs.get(key, proc)
