"""Steady-state step timings from the recipe's per-step events (shared with benchmarks/overhead.py).

Each rank emits a ``step`` event after every optimiser step, stamped with the
wall clock. Rank 0's consecutive stamps give one duration per step; the first
``warmup`` steps (start-up, first allocations, the first all-reduce buckets)
are dropped, so step k (k > warmup) lasts ``t[k] - t[k-1]``. Because DDP's
all-reduce keeps the ranks in lock step, rank 0's pace is the run's pace.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ddpstudio.core import protocol


def measured_step_times(stamps: list[tuple[int, float]], warmup: int) -> list[float]:
    """Seconds per step after the first ``warmup`` reports, from (step, wall time) pairs.

    The recipe reports every step (each gap is one step); a script may report
    every k steps, so each gap is divided by the steps it spans.
    """
    if warmup < 1:
        raise ValueError("at least one warm-up step is needed: the first step has no start stamp")
    out = []
    for i in range(warmup, len(stamps)):
        (s0, t0), (s1, t1) = stamps[i - 1], stamps[i]
        out.append((t1 - t0) / max(1, s1 - s0))
    return out


def throughput(step_times: list[float], samples_per_step: float) -> float | None:
    """Samples per second over the measured steps: samples x steps / total time."""
    total = sum(step_times)
    return samples_per_step * len(step_times) / total if step_times and total > 0 else None


@dataclass(frozen=True)
class StepSummary:
    step_times: list[float]
    mean_s: float | None
    median_s: float | None
    steps_per_s: float | None

    @classmethod
    def of(cls, step_times: list[float]) -> "StepSummary":
        if not step_times:
            return cls([], None, None, None)
        mean = sum(step_times) / len(step_times)
        return cls(list(step_times), mean, statistics.median(step_times), 1.0 / mean if mean > 0 else None)


def rank0_step_stamps(events: Iterable[protocol.Event]) -> list[tuple[int, float]]:
    """(step, wall time) of rank 0's step events, in step order."""
    return sorted((int(e.get("step", 0)), e.t) for e in events if e.type == protocol.STEP and e.rank == 0)


def read_rank_events(path: str | Path) -> list[protocol.Event]:
    """Every event in one rank's events file (``rank<N>.jsonl``)."""
    parser = protocol.EventParser()
    events: list[protocol.Event] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        events.extend(parser.feed(line))
    return events


def mean_data_wait(events: Iterable[protocol.Event], warmup: int) -> float | None:
    """Rank 0's mean share of a measured step spent waiting for the next batch."""
    waits = [float(e.get("data_wait")) for e in events
             if e.type == protocol.STEP and e.rank == 0 and int(e.get("step", 0)) > warmup
             and isinstance(e.get("data_wait"), (int, float))]
    return sum(waits) / len(waits) if waits else None
