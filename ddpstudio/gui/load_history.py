"""The machine's load over time, from the sampler's snapshots: per GPU, or per rank on the CPU.

GPU utilisation and memory are recorded all the time (the machine panel is a
live monitor); per-rank CPU load and memory only for the ranks of the current
run, which :meth:`LoadHistory.watch` names. x is seconds since the history began.
"""

from __future__ import annotations

from ddpstudio.core.gpu import Snapshot
from ddpstudio.core.metrics import rows
from ddpstudio.core.metrics.history import RunHistory
from ddpstudio.gui.series import Series

LOW_LOAD_PCT = 40.0
LOW_LOAD_WINDOW_S = 30.0


class LoadHistory:
    def __init__(self, capacity: int = 2048, t0: float | None = None) -> None:
        self.capacity = capacity
        self.t0 = t0
        self.from_run = False  # a past run's history: x already counts from that run's start
        self.gpu_util: dict[int, Series] = {}
        self.gpu_mem_gb: dict[int, Series] = {}
        self.cpu_pct: dict[int, Series] = {}  # per rank: 100 = one whole core
        self.rss_mb: dict[int, Series] = {}
        self.latest: Snapshot | None = None
        self.uuid_of: dict[int, str | None] = {}  # NVML index -> the GPU's UUID, as sampled
        self.chosen: frozenset[str] | None = None  # the GPUs a run trains on (ids: core/gpu/selection); None: all
        self._rank_of: dict[int, int] = {}  # pid -> rank
        self.version = 0

    @classmethod
    def from_history(cls, history: RunHistory, capacity: int = 2048) -> "LoadHistory":
        """A past run's load curves as its launcher sampled them (x: seconds since the run started)."""
        loaded = cls(capacity, t0=history.t0)
        loaded.from_run = True
        tables = ((rows.GPU_UTIL, loaded.gpu_util), (rows.GPU_MEM_GB, loaded.gpu_mem_gb),
                  (rows.CPU_PCT, loaded.cpu_pct), (rows.RSS_MB, loaded.rss_mb))
        for metric, table in tables:
            for key in history.keys(metric):
                track = history.track(metric, key)
                series = loaded._series(table, key)
                for t, value in zip(track.t, track.value):
                    series.append(t, value)
        loaded.version += 1
        return loaded

    @property
    def cpu_mode(self) -> bool:
        """True when no GPU was sampled: the load is per rank."""
        return not self.gpu_util

    def choose(self, ids: list[str]) -> None:
        """Show only these GPUs' load ([]: every GPU's): the others' is not the run's. Still recorded."""
        chosen = frozenset(ids) or None
        if chosen != self.chosen:
            self.chosen = chosen
            self.version += 1

    def shows_gpu(self, key: int) -> bool:
        """Whether GPU ``key`` (NVML's index, the tables' key) is among the chosen, matched by UUID."""
        return self.chosen is None or (self.uuid_of.get(key) or str(key)) in self.chosen

    def watch(self, rank_pids: dict[int, int]) -> None:
        """The ranks of a new run (rank -> pid); their curves start afresh."""
        if set(rank_pids.values()) != set(self._rank_of):
            for series in (*self.cpu_pct.values(), *self.rss_mb.values()):
                series.clear()
        self._rank_of = {pid: rank for rank, pid in rank_pids.items()}
        self.version += 1

    def _series(self, table: dict[int, Series], key: int) -> Series:
        if key not in table:
            table[key] = Series(self.capacity)
        return table[key]

    def add(self, snapshot: Snapshot) -> None:
        if self.t0 is None:
            self.t0 = snapshot.t
        x = snapshot.t - self.t0
        for gpu in snapshot.gpus:
            self.uuid_of[gpu.index] = gpu.uuid
            self._series(self.gpu_util, gpu.index).append(x, gpu.utilization_pct)
            mem = None if gpu.memory_used_mb is None else gpu.memory_used_mb / 1024
            self._series(self.gpu_mem_gb, gpu.index).append(x, mem)
        for proc in snapshot.processes:
            rank = self._rank_of.get(proc.pid)
            if rank is not None:
                self._series(self.cpu_pct, rank).append(x, proc.cpu_pct)
                self._series(self.rss_mb, rank).append(x, proc.rss_mb)
        self.latest = snapshot
        self.version += 1

    def rank_load(self) -> dict[int, float]:
        """rank -> CPU% in the latest snapshot."""
        if self.latest is None:
            return {}
        return {self._rank_of[p.pid]: p.cpu_pct for p in self.latest.processes if p.pid in self._rank_of}

    def mean_gpu_util(self, window_s: float = LOW_LOAD_WINDOW_S) -> float | None:
        """Mean utilisation over the chosen GPUs in the last ``window_s`` seconds; None without data."""
        values = []
        for key, series in self.gpu_util.items():
            if not self.shows_gpu(key):
                continue  # an idle display GPU left out of the run must not read as an idle run
            x, y = series.data()
            if len(x):
                recent = y[x >= x[-1] - window_s]
                values.extend(v for v in recent.tolist() if v == v)
        return sum(values) / len(values) if values else None
