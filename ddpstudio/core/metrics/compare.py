"""Several runs' curves on one x axis, and the table under the compare chart (Qt-free).

The x axis is the global step, the samples seen (step x effective batch) or
the wall time since each run started: the PyTorch-on-Windows blog's figure
draws loss against wall time, where more ranks reach a loss sooner.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.core.metrics import rows
from ddpstudio.core.metrics.catalog import RunEntry, entry, higher_is_better, live_ids
from ddpstudio.core.metrics.history import RunHistory, Track, read_history


class XAxis(enum.StrEnum):
    STEP = "step"
    SAMPLES = "samples"
    WALL = "wall"


X_LABELS = {XAxis.STEP: "step", XAxis.SAMPLES: "samples seen", XAxis.WALL: "wall time since start (s)"}


class Quantity(enum.StrEnum):
    TRAIN_LOSS = "train loss"
    EVAL_LOSS = "eval loss"
    EVAL_ACCURACY = "eval accuracy"
    THROUGHPUT = "samples/s"


ACCURACY_METRICS = ("eval_top1", "eval_accuracy", "eval_acc")


def metric_for(history: RunHistory, quantity: Quantity) -> str:
    """The history metric a quantity is drawn from in this run."""
    if quantity is Quantity.TRAIN_LOSS:
        return rows.GLOBAL_LOSS
    if quantity is Quantity.EVAL_LOSS:
        return "eval_loss"
    if quantity is Quantity.THROUGHPUT:
        return rows.SAMPLES_PER_S
    present = history.metrics()
    found = [m for m in ACCURACY_METRICS if m in present]
    found += [m for m in present if m.startswith(rows.EVAL_PREFIX) and higher_is_better(m) and "top5" not in m]
    return found[0] if found else ACCURACY_METRICS[0]


def higher_better(quantity: Quantity) -> bool:
    return quantity in (Quantity.EVAL_ACCURACY, Quantity.THROUGHPUT)


def xs(track: Track, axis: XAxis, effective_batch: int | None) -> list[float]:
    """The x of each point; a point without a step has none on the step axes (NaN)."""
    if axis is XAxis.WALL:
        return list(track.t)
    scale = 1 if axis is XAxis.STEP else (effective_batch or 0)
    nan = float("nan")
    return [nan if s is None or not scale else float(s * scale) for s in track.step]


@dataclass(frozen=True)
class Curve:
    x: list[float]
    y: list[float]


def curve(history: RunHistory, quantity: Quantity, axis: XAxis) -> Curve:
    track = history.track(metric_for(history, quantity))
    return Curve(xs(track, axis, history.effective_batch), list(track.value))


# Per-step training loss is noisy: one lucky batch must not count as "reached". Times to a train-loss
# threshold are measured on the curve smoothed as TensorBoard smooths by default (debiased EMA, weight 0.6).
SMOOTHING = 0.6


def smoothed(values: list[float], weight: float = SMOOTHING) -> list[float]:
    """TensorBoard's scalar smoothing: an exponential moving average, debiased at the start."""
    out, last = [], 0.0
    for i, value in enumerate(values, start=1):
        last = last * weight + (1 - weight) * value
        out.append(last / (1 - weight ** i) if weight else value)
    return out


def smoothing_for(quantity: Quantity) -> float:
    """Eval metrics are already means over the whole held-out set: only train loss and throughput are smoothed."""
    return SMOOTHING if quantity in (Quantity.TRAIN_LOSS, Quantity.THROUGHPUT) else 0.0


def time_to_threshold(track: Track, threshold: float, higher_is_better_: bool, weight: float = 0.0) -> float | None:
    """Seconds from the run's start until the (smoothed) curve first reaches ``threshold``; None if never."""
    for t, value in zip(track.t, smoothed(track.value, weight)):
        if (value >= threshold) if higher_is_better_ else (value <= threshold):
            return t
    return None


@dataclass(frozen=True)
class Compared:
    """One run in a comparison: its list entry (facts) and its history (curves)."""

    entry: RunEntry
    history: RunHistory

    @property
    def label(self) -> str:
        e = self.entry
        ranks = f"{e.world_size} rank{'s' if e.world_size != 1 else ''}"
        batch = f"batch {e.batch_size}/rank" if e.batch_size else ""
        lr = f"lr {e.lr:g}" if e.lr else ""
        where = f"{e.backend} on {e.device}"
        bench = "bench" if e.origin == "bench" else ""
        return ", ".join(p for p in (ranks, batch, lr, where, bench) if p) + f" ({e.run_id[-6:]})"


@dataclass(frozen=True)
class SummaryRow:
    label: str
    duration_s: float | None
    time_to_threshold_s: float | None
    final: float | None
    best: float | None
    samples_per_s: float | None
    speedup: float | None  # against the first run: time to threshold when both reached it, else samples/s
    speedup_basis: str


def summarize(runs: list[Compared], quantity: Quantity, threshold: float | None) -> list[SummaryRow]:
    """The table under the chart, one row per run in the order given (the first is the baseline)."""
    better_high = higher_better(quantity)
    table: list[SummaryRow] = []
    base_time = base_rate = None
    for i, run in enumerate(runs):
        track = run.history.track(metric_for(run.history, quantity))
        weight = smoothing_for(quantity)
        reached = time_to_threshold(track, threshold, better_high, weight) if threshold is not None else None
        best = (max(track.value) if better_high else min(track.value)) if track.value else None
        rate = run.entry.mean_samples_per_s
        if i == 0:
            base_time, base_rate = reached, rate
        if base_time and reached:
            speedup, basis = base_time / reached, "time to threshold"
        elif base_rate and rate:
            speedup, basis = rate / base_rate, "samples/s"
        else:
            speedup, basis = None, ""
        table.append(SummaryRow(run.label, run.entry.duration_s, reached, track.value[-1] if track.value else None,
                                best, rate, speedup, basis))
    return table


def load(run_dirs: list[str]) -> list[Compared]:
    """The runs in these folders, in the order given (folders that are not runs are left out)."""
    found = []
    live = live_ids()
    for folder in run_dirs:
        e = entry(Path(folder), live)
        if e is not None:
            found.append(Compared(e, read_history(folder)))
    return found


def default_threshold(runs: list[Compared], quantity: Quantity) -> float | None:
    """A threshold every run reached: the worst final (smoothed) value among them (None for throughput)."""
    if quantity is Quantity.THROUGHPUT:
        return None
    weight = smoothing_for(quantity)
    finals = [smoothed(r.history.track(metric_for(r.history, quantity)).value, weight)[-1:] for r in runs]
    finals = [f[0] for f in finals if f]
    if not finals:
        return None
    return min(finals) if higher_better(quantity) else max(finals)
