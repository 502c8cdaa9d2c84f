"""Test seam: count the recipe's gradient exchanges with a wrapper around its DDP communication hook.

With ``DDPSTUDIO_COUNT_EXCHANGES=1`` the recipe registers its usual hook (or, for
the native exchange, torch's own ``allreduce_hook``, which does what DDP's
built-in all-reduce does: divide by the group's size, all-reduce) inside a
wrapper that counts the buckets DDP hands over. DDP calls the hook once per
bucket of every backward that synchronises, and ``GradBucket.is_last()`` marks
the last one, so the count is the number of exchanges; each ``step`` event
then carries it. Gradient accumulation's tests read it: one exchange per
optimizer step, none for micro-batches under ``no_sync()``. Runs without the
variable register their hook as always (rank/staged.py).
"""

from __future__ import annotations

import os
from typing import Any

COUNT_ENV = "DDPSTUDIO_COUNT_EXCHANGES"


def enabled() -> bool:
    return os.environ.get(COUNT_ENV) == "1"


class ExchangeCount:
    """Exchanges so far: backward passes whose gradients were all-reduced."""

    def __init__(self) -> None:
        self.count = 0


def register_counted(model: Any, mode: str, compression: str = "none", group: Any = None) -> ExchangeCount:
    """Register the hook ``mode``/``compression`` need, counted; returns the live count."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    from ddpstudio.rank.staged import hook_for

    state, hook = hook_for(mode, compression, group) or (group, allreduce_hook)
    counted = ExchangeCount()

    # No annotations: DDP checks only those that are present (distributed.py ``_check_comm_hook``), and
    # the parameter must be called ``bucket`` (it reads ``sig.parameters["bucket"]``).
    def counting_hook(state, bucket):
        if bucket.is_last():
            counted.count += 1
        return hook(state, bucket)

    model.register_comm_hook(state, counting_hook)
    return counted
