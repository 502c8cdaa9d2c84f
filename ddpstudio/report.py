"""A tiny reporter for your own training script.

    from ddpstudio import report
    report.step(step, loss.item(), samples_per_s=...)

Under DDP Studio each call becomes a protocol event on the live plots; run
any other way (by hand, under torchrun) every call does nothing. Standard
library only, so importing it costs nothing in a rank.
"""

from __future__ import annotations

import math
from typing import Any

from ddpstudio.core import protocol
from ddpstudio.rank.emit import Emitter, rank_from_env

_emitter: Emitter | None = None
steps_reported = False  # step() was called: the rank helper then reports no steps of its own (rank/steploss.py)


def _get() -> Emitter:
    global _emitter
    if _emitter is None:
        _emitter = Emitter(rank_from_env())
    return _emitter


def enabled() -> bool:
    """True when running under DDP Studio (events go somewhere)."""
    return _get().enabled


def joined() -> None:
    """Say that this rank finished init_process_group (feeds the rendezvous watchdog)."""
    _get().emit(protocol.RANK_JOINED)


def step(step: int, loss: float, samples_per_s: float | None = None, **extra: Any) -> None:
    """Report one training step's loss (and throughput, if you know it).

    The launcher averages the ranks' reports by step into the run's progress and global-mean curve, so
    ``samples_per_s`` is best the whole run's rate (``batch * world_size / step_time``); ``total_steps=N``
    in ``extra`` gives the progress bar its end.
    """
    global steps_reported
    steps_reported = True
    loss = float(loss)
    data: dict[str, Any] = {"step": int(step), "loss": loss if math.isfinite(loss) else None}
    if samples_per_s is not None:
        data["samples_per_s"] = float(samples_per_s)
    data.update(extra)
    _get().emit(protocol.STEP, **data)


def epoch_end(epoch: int, loss: float | None = None, **extra: Any) -> None:
    _get().emit(protocol.EPOCH_END, epoch=int(epoch), loss=loss, **extra)


def log(message: str) -> None:
    _get().emit(protocol.LOG, stream="report", line=str(message))


def warning(message: str) -> None:
    _get().emit(protocol.WARNING, message=str(message))
