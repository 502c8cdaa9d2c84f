"""How many DataLoader worker processes each rank of the built-in recipe starts, with the reason.

A rank that loads its own data (0 workers) makes the GPU wait: on an H100 the
recipe ran resnet50 at 19 % of the GPU's ceiling with 0 workers and 77 % with
8 (issue 20). Each rank keeps one core for its own process (it feeds the GPU,
or computes on the CPU); the rest of the machine's cores are shared out. At
most 8 per rank: past that a rank rarely loads faster, and each worker is a
process with its own memory.

Windows has no fork: workers start with spawn, each a fresh interpreter that
imports torch and unpickles the dataset. Measured with
``benchmarks/worker_startup.py`` on a loaded 2-core Linux machine: 5.6 s to
the first batch for one spawned worker (synthetic data), 7.8 s (an image
folder), against 0.1 s with fork; the next epoch's first batch 4-55 ms either
way. Workers are therefore persistent: the start-up is paid once per run.
"""

from __future__ import annotations

import os

from ddpstudio.core.platform import Platform
from ddpstudio.core.decision import Decision

MAX_WORKERS = 8


def usable_cores() -> int:
    """The cores this process may run on: the affinity mask where there is one (as torch's DataLoader
    counts them, ``torch/_utils.py`` ``cpu_count``: ``len(os.sched_getaffinity(0))``), else all."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def choose_workers(requested: int | None, cores: int, ranks: int, platform: Platform,
                   data: str = "folder") -> Decision:
    """DataLoader workers per rank: ``requested`` (``None``: chosen here) for ``ranks`` ranks on ``cores``
    reading ``data`` (the recipe's data source)."""
    if requested is not None:
        return Decision(requested, f"DataLoader workers: {requested} per rank, chosen by you")
    if data == "synthetic":
        return Decision(0, "DataLoader workers: 0 per rank (synthetic images are built on each rank's device "
                           "from a pool: there is nothing to load); --workers overrides")
    ranks = max(1, ranks)
    spare = cores // ranks - 1
    count = min(MAX_WORKERS, max(0, spare))
    if count == 0:
        why = (f"{cores} core{'s' if cores != 1 else ''} for {ranks} rank{'s' if ranks != 1 else ''} leave none "
               "spare, so each rank loads its own data")
    else:
        why = (f"{cores} cores / {ranks} rank{'s' if ranks != 1 else ''}, one core kept for each rank"
               + (f", at most {MAX_WORKERS}" if spare > MAX_WORKERS else ""))
        if platform.is_windows:
            why += "; started once per run (spawn: each imports torch, a few seconds)"
    return Decision(count, f"DataLoader workers: {count} per rank ({why}); --workers overrides")


def workers_in_rank(requested: int | None, ranks_here: int, data: str) -> int:
    """The number a rank uses: the plan's, or (a plan written without one) the same choice made here."""
    if requested is not None:
        return requested
    from ddpstudio.core.platform import current

    return int(choose_workers(None, usable_cores(), ranks_here, current(), data).value)
