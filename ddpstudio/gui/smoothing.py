"""TensorBoard's scalar smoothing: a debiased exponential moving average.

The same formula as TensorBoard's scalars dashboard (``resampleAndSmooth`` in
tensorboard/webapp/widgets/line_chart_v2/lib/data_transformer_utils.ts): the
running average starts at 0 and is divided by ``1 - weight**n``, so the
first points are not dragged towards zero. Non-finite values pass through
unsmoothed and do not disturb the average.
"""

from __future__ import annotations

import math

import numpy as np

MAX_WEIGHT = 0.999


def ema(y: np.ndarray, weight: float) -> np.ndarray:
    """Smoothed copy of ``y``; ``weight`` in [0, 1): 0 is no smoothing, 0.99 is heavy."""
    y = np.asarray(y, dtype=float)
    if weight <= 0 or len(y) == 0:
        return y.copy()
    weight = min(weight, MAX_WEIGHT)
    out = np.empty_like(y)
    last, n = 0.0, 0
    for i, value in enumerate(y.tolist()):  # a Python loop over at most a few thousand points per redraw
        if not math.isfinite(value):
            out[i] = value
            continue
        last = last * weight + (1 - weight) * value
        n += 1
        out[i] = last / (1 - weight ** n)
    return out
