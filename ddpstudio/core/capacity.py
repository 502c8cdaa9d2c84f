"""How many ranks this machine can hold on the CPU: its cores and its free memory, with the numbers.

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
