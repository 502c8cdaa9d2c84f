"""The recipe's per-step numbers, read from the device at report points instead of after every step.

Reading a loss (``loss.item()``) makes the host wait for the GPU, and the
all-reduce that checks every rank's loss for NaN makes every rank wait for the
slowest: done each step, both keep the GPU's queue from ever filling. Here the
losses stay on the device until a report point; there one all-reduce carries
all of them (and the next interval, so every rank agrees on it), one copy
brings them to the host, and the ``step`` and ``global_step`` events of every
step in between are written with their own times. Report points come about
every ``TARGET_S`` seconds (every step when steps are slower than that), and
at the end of each epoch, before each evaluation and when the run is done.

A NaN or infinite loss on any rank is in the all-reduced sum of its step, so
every rank stops at the same report point, naming the first such step.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from ddpstudio.core import protocol

TARGET_S = 0.25  # seconds between report points: 4 updates a second for the plots and the progress line
MAX_INTERVAL = 100  # steps: a NaN is found at most this many steps after it appeared


def next_interval(window_s: float, steps: int) -> int:
    """Steps to the next report point, from the last window's length (``steps`` steps in ``window_s``)."""
    if steps <= 0 or not window_s > 0:
        return 1
    return max(1, min(MAX_INTERVAL, int(TARGET_S * steps / window_s)))


def divergence_message(value: float, step: int, found_at: int, hint: str) -> str:
    what = "NaN" if math.isnan(value) else "infinite"
    found = f" (found at step {found_at}, a report point)" if found_at != step else ""
    return f"loss became {what} at step {step}{found}; the run stops and the last checkpoint is kept. {hint}"


@dataclass(frozen=True)
class Pending:
    step: int
    epoch: int
    loss: Any  # a 0-dim tensor on the rank's device
    lr: float
    t: float  # wall time at the step's end, as the host saw it
    dt: float  # seconds since the previous step's end
    waited: float  # of which waiting for the data loader
    exchanges: int | None = None  # gradient exchanges so far, where a test counts them (rank/exchangecount.py)


@dataclass(frozen=True)
class Reported:
    step: int
    mean_loss: float  # over all ranks


class Reporter:
    """Collects each step's loss on the device; :meth:`flush` reads, checks and reports them all at once."""

    def __init__(self, emitter, rank: int, world_size: int, exchange: str, batch: int, log_every: int) -> None:
        self.emit, self.rank, self.world_size, self.exchange = emitter, rank, world_size, exchange
        self.batch, self.log_every = batch, max(1, log_every)
        self.pending: list[Pending] = []
        self.interval = 1  # the first step is reported at once
        self._window_start = time.perf_counter()
        self._window: tuple[float, int] = (0.0, 0)  # the last complete window: seconds, steps

    @property
    def due(self) -> bool:
        return len(self.pending) >= self.interval

    def add(self, step: Pending) -> None:
        self.pending.append(step)

    def restart_clock(self) -> None:
        """After work that is not training (an evaluation, a checkpoint): the next window starts now."""
        self._window_start = time.perf_counter()

    def flush(self, global_info: dict[str, Any], diverged_hint: str) -> list[Reported]:
        """One all-reduce and one copy to the host for every pending step; emits their events.

        Every rank must call it at the same steps (it is a collective). Raises ``FloatingPointError``
        naming the first step whose loss, summed over the ranks, is not finite.
        """
        if not self.pending:
            return []
        import torch

        from ddpstudio.rank.staged import all_reduce

        pending, self.pending = self.pending, []
        n = len(pending)
        local = torch.stack([p.loss.detach().reshape(()) for p in pending]).to(torch.float64)
        # Rank 0 proposes the next interval; the others add 0, so the sum is rank 0's number on every rank.
        proposal = float(next_interval(*self._window)) if self.rank == 0 else 0.0
        mine = torch.cat([local, local.new_tensor([proposal])])
        if self.exchange == "staged":
            mine = mine.cpu()  # Gloo on CUDA under Windows cannot all-reduce it (rank/staged.py): one copy, here
        total = mine.clone()
        all_reduce(total, self.exchange)
        values = torch.cat([mine, total]).tolist()  # the one wait for the device
        now = time.perf_counter()
        self._window, self._window_start = (now - self._window_start, n), now
        self.interval = max(1, int(values[-1]))
        losses, means = values[:n], [v / self.world_size for v in values[n + 1: 2 * n + 1]]
        bad = next((i for i, m in enumerate(means) if not math.isfinite(m)), None)
        reported = []
        for i, (p, loss, mean) in enumerate(zip(pending, losses, means)):
            rate = self.batch / p.dt if p.dt > 0 else None
            counted = {} if p.exchanges is None else {"exchanges": p.exchanges}
            self.emit.emit(protocol.STEP, t=p.t, step=p.step, epoch=p.epoch, loss=loss if math.isfinite(loss) else None,
                           lr=p.lr, samples_per_s=rate, data_wait=p.waited / p.dt if p.dt > 0 else 0.0, **counted)
            if bad is not None and i >= bad:
                continue
            reported.append(Reported(p.step, mean))
            if self.rank == 0 and p.step % self.log_every == 0:
                self.emit.emit(protocol.GLOBAL_STEP, rank=None, t=p.t, step=p.step, epoch=p.epoch, loss=mean, lr=p.lr,
                               samples_per_s=self.world_size * rate if rate else None, **global_info)
        if bad is not None:
            raise FloatingPointError(divergence_message(means[bad], pending[bad].step, pending[-1].step,
                                                        diverged_hint))
        return reported
