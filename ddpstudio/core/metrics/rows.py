"""The rows of a run's ``history.jsonl``: the format both the writer and the reader use.

The first line is a header object; every other line is one measurement, a
JSON array ``[metric, key, step, t, value]``: ``key`` names the rank or GPU
(``null`` for run-wide values), ``step`` is the global step (``null`` for load
samples), ``t`` is seconds since the run started. Standard library only.
"""

from __future__ import annotations

import math
from typing import Any, Collection

from ddpstudio.core import protocol

FORMAT_VERSION = 1
FILE_NAME = "history.jsonl"

LOSS = "loss"  # per rank (key = rank)
GLOBAL_LOSS = "global_loss"  # mean over ranks
SAMPLES_PER_S = "samples_per_s"  # all ranks together
LR = "lr"
EVAL_PREFIX = "eval_"  # eval_loss, eval_top1, eval_top5, ...: every number an eval event carries
CPU_PCT = "cpu_pct"  # per rank, 100 = one whole core
RSS_MB = "rss_mb"  # per rank
GPU_UTIL = "gpu_util"  # per GPU index, %
GPU_MEM_GB = "gpu_mem_gb"  # per GPU index, GiB used

EVAL = "eval"  # the event type the built-in recipe reports evaluations with
_NOT_METRICS = frozenset({"step", "epoch", "samples", "total_steps", "steps_per_epoch"})

Row = list  # [metric, key, step, t, value]
_MEASURED = frozenset({protocol.STEP, protocol.GLOBAL_STEP, EVAL})  # the types event_rows reads


def header(*, run_id: str, t0: float, world_size: int | None, effective_batch: int | None, origin: str = "run",
           **extra: Any) -> dict[str, Any]:
    """The first line: ``t0`` (time.time() at the start) turns every row's ``t`` back into a date."""
    return {"history": FORMAT_VERSION, "run_id": run_id, "t0": t0, "world_size": world_size,
            "effective_batch": effective_batch, "origin": origin, **extra}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def row(metric: str, key: int | None, step: int | None, t: float, value: float) -> Row:
    return [metric, key, step, round(t, 3), _round(value)]


def event_rows(event: protocol.Event, t0: float) -> list[Row]:
    """The measurements one protocol event carries (none for most event types)."""
    if event.type not in _MEASURED:
        return []  # a log line, most of what the launcher merges when a script prints every step
    t = event.t - t0
    step = event.get("step")
    step = int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) else None
    out: list[Row] = []
    if event.type == protocol.STEP and event.rank is not None and step is not None:
        loss = _num(event.get("loss"))
        if loss is not None:
            out.append(row(LOSS, event.rank, step, t, loss))
    elif event.type == protocol.GLOBAL_STEP and step is not None:
        for metric, field in ((GLOBAL_LOSS, "loss"), (SAMPLES_PER_S, "samples_per_s"), (LR, "lr")):
            value = _num(event.get(field))
            if value is not None:
                out.append(row(metric, None, step, t, value))
    elif event.type == EVAL:
        for field, raw in event.data.items():
            value = _num(raw)
            if value is not None and field not in _NOT_METRICS:
                out.append(row(EVAL_PREFIX + field, None, step, t, value))
    return out


def snapshot_rows(snapshot: Any, rank_of: dict[int, int], t0: float, gpus: Collection[str] | None = None) -> list[Row]:
    """Load and memory from a ``core.gpu.Snapshot``: per GPU, and per rank (pid -> rank in ``rank_of``).

    ``gpus``: the run's chosen GPUs (``Plan.gpus``, UUIDs); the others' load is not the run's."""
    t = snapshot.t - t0
    out: list[Row] = []
    for gpu in snapshot.gpus:
        if gpus is not None and (gpu.uuid or str(gpu.index)) not in gpus:
            continue
        if gpu.utilization_pct is not None:
            out.append(row(GPU_UTIL, gpu.index, None, t, gpu.utilization_pct))
        if gpu.memory_used_mb is not None:
            out.append(row(GPU_MEM_GB, gpu.index, None, t, gpu.memory_used_mb / 1024))
    for proc in snapshot.processes:
        rank = rank_of.get(proc.pid)
        # A rank that has exited but is not yet reaped reads 0 bytes (a zombie, on Linux): not a measurement.
        if rank is not None and proc.rss_mb > 0:
            out.append(row(CPU_PCT, rank, None, t, proc.cpu_pct))
            out.append(row(RSS_MB, rank, None, t, proc.rss_mb))
    return out


def parse_row(raw: Any) -> Row | None:
    """A row read back, or None when it is not one (a reader skips it)."""
    if not isinstance(raw, list) or len(raw) != 5 or not isinstance(raw[0], str):
        return None
    metric, key, step, t, value = raw
    if _num(t) is None or _num(value) is None:
        return None
    if key is not None and not isinstance(key, int):
        return None
    if step is not None and not isinstance(step, int):
        return None
    return raw


