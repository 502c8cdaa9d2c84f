"""How many ranks (on the CPU) and DataLoader workers this machine can hold, with the numbers.

Each CPU rank is a full interpreter with torch loaded: measured at about
940 MiB resident (resnet18, 32-pixel images, batch 8, torch 2.14.1), so a
rank is budgeted 1 GiB. Each rank computes on one thread; beyond two ranks
per core they only take turns, and Gloo's collectives start missing their
deadlines. ``--oversubscribe`` lifts the limit for people who know better.
"""

from __future__ import annotations

from dataclasses import dataclass

RANK_MEMORY_BYTES = 2**30
RANKS_PER_CORE = 2


@dataclass(frozen=True)
class CpuCapacity:
    cores: int
    available_bytes: int

    @property
    def by_cores(self) -> int:
        return max(1, self.cores * RANKS_PER_CORE)

    @property
    def by_memory(self) -> int:
        return max(1, self.available_bytes // RANK_MEMORY_BYTES)

    @property
    def max_ranks(self) -> int:
        return min(self.by_cores, self.by_memory)

    def problem(self, world_size: int) -> str | None:
        """Why ``world_size`` CPU ranks do not fit, with the machine's numbers, or ``None``."""
        if world_size <= self.max_ranks:
            return None
        gib = self.available_bytes / 2**30
        return (f"{world_size} ranks on the CPU do not fit this machine: it has {self.cores} CPU cores "
                f"(room for {self.by_cores} ranks at {RANKS_PER_CORE} per core) and {gib:.1f} GiB of free memory "
                f"(room for {self.by_memory} at about 1 GiB each); use a world size of at most {self.max_ranks}, "
                "or add --oversubscribe if you know it fits")


def measure() -> CpuCapacity:
    import os

    import psutil

    return CpuCapacity(cores=os.cpu_count() or 1, available_bytes=psutil.virtual_memory().available)


# DataLoader workers (issue 27: --workers 10000 started ten thousand processes per rank and woke the OOM killer).
# torch itself warns past one worker per core and DataLoader (torch/utils/data/dataloader.py,
# check_worker_number_rationality: "Our suggested max number of worker in current system is ...");
# a few per core still overlap reading with decoding, past that they only queue for the CPU.
WORKERS_PER_CORE = 4
# A spawned worker (Windows: no fork) imports torch: measured 283 MiB of its own, 515 MiB resident
# (torch 2.14.1, Linux, spawn context); a forked one about 15 MiB of its own.
WORKER_MEMORY_BYTES = 2**29
# File descriptors each worker costs its rank: measured 5 (fork, 8 workers: 40 more in the rank), plus
# batches in flight, which travel as file descriptors under torch's default sharing strategy on Linux.
WORKER_OPEN_FILES = 8
RESERVED_OPEN_FILES = 128  # the rank's own: torch's libraries, Gloo's sockets, logs


@dataclass(frozen=True)
class WorkerRoom:
    """How many DataLoader workers per rank this machine holds, by cores, free memory and open files."""

    cores: int
    available_bytes: int
    open_files: int | None  # the soft limit of open files per process; None where there is none (Windows)

    def limits(self, ranks: int) -> list[tuple[int, str]]:
        """(most workers per rank, why) for each resource."""
        ranks = max(1, ranks)
        by_cores = max(1, self.cores * WORKERS_PER_CORE // ranks)
        spare = max(0, self.available_bytes - ranks * RANK_MEMORY_BYTES)
        by_memory = max(1, spare // WORKER_MEMORY_BYTES // ranks)
        found = [(by_cores, f"{self.cores} CPU cores (room for {by_cores} per rank at {WORKERS_PER_CORE} per core "
                            f"over {ranks} rank{'s' if ranks != 1 else ''})"),
                 (by_memory, f"{self.available_bytes / 2**30:.1f} GiB of free memory (room for {by_memory} per "
                             "rank at about 0.5 GiB each, after 1 GiB per rank)")]
        if self.open_files is not None:
            by_files = max(1, (self.open_files - RESERVED_OPEN_FILES) // WORKER_OPEN_FILES)
            found.append((by_files, f"a limit of {self.open_files} open files per process (room for {by_files} "
                                    f"at about {WORKER_OPEN_FILES} each)"))
        return found

    def most(self, ranks: int) -> int:
        return min(n for n, _ in self.limits(ranks))

    def problem(self, workers: int, ranks: int) -> str | None:
        """Why ``workers`` per rank do not fit, naming each resource they exceed, or ``None``."""
        over = [why for n, why in self.limits(ranks) if workers > n]
        if not over:
            return None
        listed = over[0] if len(over) == 1 else ", ".join(over[:-1]) + " and " + over[-1]
        return (f"{workers} DataLoader workers per rank do not fit this machine: it has {listed}; "
                f"use at most {self.most(ranks)} (0 loads data in each rank itself), or add --oversubscribe "
                "if you know it fits")


def worker_room() -> WorkerRoom:
    import psutil

    from ddpstudio.core.dataworkers import usable_cores

    try:
        import resource  # POSIX only; Windows has no per-process open-file limit of this kind

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        files = None if soft == resource.RLIM_INFINITY else int(soft)
    except ImportError:
        files = None
    return WorkerRoom(usable_cores(), psutil.virtual_memory().available, files)
