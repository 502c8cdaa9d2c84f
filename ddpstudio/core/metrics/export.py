"""A run's history out to the tools people already use: CSV, and TensorBoard event files.

TensorBoard files are written with TensorBoard's own writer, an optional
dependency (``pip install ddpstudio[tensorboard]``): without it
:class:`MissingTensorBoard` says which group to install. Every curve becomes a
scalar tag with its step and its wall-clock time (``t0 + t``), so TensorBoard's
"relative" and "wall" axes show the run as it happened.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ddpstudio.core.metrics import rows
from ddpstudio.core.metrics.history import RunHistory

CSV_COLUMNS = ("metric", "key", "step", "seconds_since_start", "unix_time", "value")
OPTIONAL_GROUP = "tensorboard"
INSTALL_HINT = f"pip install \"ddpstudio[{OPTIONAL_GROUP}]\" (or: pip install tensorboard)"
PER_RANK = {rows.LOSS, rows.CPU_PCT, rows.RSS_MB}


class MissingTensorBoard(RuntimeError):
    """TensorBoard is not installed; the message names the optional dependency group."""


def write_csv(history: RunHistory, path: str | Path) -> int:
    """One row per measurement, in the order measured per curve; returns the rows written."""
    n = 0
    with open(path, "w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(CSV_COLUMNS)
        for (metric, key), track in sorted(history.tracks.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
            for step, t, value in zip(track.step, track.t, track.value):
                out.writerow([metric, "" if key is None else key, "" if step is None else step, f"{t:.3f}",
                              f"{history.t0 + t:.3f}", repr(value)])
                n += 1
    return n


def tag(metric: str, key: int | None) -> str:
    """TensorBoard's tag for a curve: train/loss, train/loss/rank1, eval/top1, load/gpu_util/gpu0."""
    if metric.startswith(rows.EVAL_PREFIX):
        name = "eval/" + metric.removeprefix(rows.EVAL_PREFIX)
    elif metric in (rows.GPU_UTIL, rows.GPU_MEM_GB, rows.CPU_PCT, rows.RSS_MB):
        name = "load/" + metric
    elif metric == rows.GLOBAL_LOSS:
        name = "train/loss"
    else:
        name = "train/" + metric
    if key is None:
        return name
    return f"{name}/{'rank' if metric in PER_RANK else 'gpu'}{key}"


def write_tensorboard(history: RunHistory, logdir: str | Path) -> int:
    """Event files under ``logdir``; returns the scalars written. Load samples (no step) count 0, 1, 2..."""
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError:
        raise MissingTensorBoard(f"TensorBoard export needs the optional '{OPTIONAL_GROUP}' dependencies: "
                                 f"{INSTALL_HINT}") from None
    Path(logdir).mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(logdir))
    n = 0
    try:
        for (metric, key), track in sorted(history.tracks.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
            name = tag(metric, key)
            for i, (step, t, value) in enumerate(zip(track.step, track.t, track.value)):
                summary = Summary(value=[Summary.Value(tag=name, simple_value=value)])
                writer.add_event(Event(wall_time=history.t0 + t, step=i if step is None else step, summary=summary))
                n += 1
    finally:
        writer.close()
    return n
