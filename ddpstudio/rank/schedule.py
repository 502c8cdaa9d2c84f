"""The learning-rate schedule of the built-in recipe: constant, step or cosine, after a linear warm-up.

A pure function of the global step, so a resumed run lands on exactly the LR it
would have had (no scheduler state to checkpoint). Names in
:data:`ddpstudio.core.plan.LR_SCHEDULES`.
"""

from __future__ import annotations

import math

# step: the LR is multiplied by this at these fractions of the run (the classic ResNet recipe, 10x drops).
STEP_DROPS = (0.5, 0.75)
STEP_FACTOR = 0.1


def lr_at(step: int, base: float, schedule: str = "constant", warmup_steps: int = 0,
          total_steps: int | None = None) -> float:
    """The LR for optimizer step ``step`` (0-based: the step about to be taken).

    Warm-up rises linearly from ``base / warmup_steps`` to ``base``. Step and cosine
    decay need ``total_steps``; without it (an open-ended run) they stay at ``base``.
    """
    if warmup_steps > 0 and step < warmup_steps:
        return base * (step + 1) / warmup_steps
    if schedule == "constant" or not total_steps:
        return base
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, max(0.0, (step - warmup_steps) / span))
    if schedule == "step":
        return base * STEP_FACTOR ** sum(progress >= drop for drop in STEP_DROPS)
    if schedule == "cosine":
        return base * 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown learning-rate schedule {schedule!r}: use constant, step or cosine")


def apply(optimizer, lr: float) -> None:
    """Set every parameter group's LR (SGD reads it at each step)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
