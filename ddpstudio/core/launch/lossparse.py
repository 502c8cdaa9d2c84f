"""The free-text adapter: loss values scraped from progress lines of scripts that know nothing of us.

Only for scripts that do not use ``ddpstudio.report``; everything else speaks
the protocol. Understands, among others, the PyTorch ImageNet example's
``Loss 6.8416e+00 (6.8416e+00)``, ``loss: 0.53``, ``loss=0.5`` and
``train_loss 0.31``. A step number is taken from ``step 12``, ``iter 7`` or
``it 7`` when it moves forward; otherwise (e.g. ``[ 10/500]``, which restarts
every epoch) loss lines are numbered in order.
"""

from __future__ import annotations

import math
import re

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"
_LOSS = re.compile(rf"(?<![\w.])(?:train[_ ])?loss\b\s*[:=]?\s*(?P<value>{_NUMBER})", re.IGNORECASE)
_STEP = re.compile(r"(?:\bstep|\biter(?:ation)?|\bit)\s*[:=#]?\s*(?P<step>\d+)|\[\s*(?P<batch>\d+)\s*/\s*\d+\s*\]",
                   re.IGNORECASE)


def parse_loss(line: str) -> tuple[float, int | None] | None:
    """(loss, step or None) found in a progress line, or None."""
    match = _LOSS.search(line)
    if not match:
        return None
    try:
        loss = float(match.group("value"))
    except ValueError:
        return None
    step_match = _STEP.search(line)
    step = int(step_match.group("step")) if step_match and step_match.group("step") else None
    return loss, step


class LossScraper:
    """Per-rank state: turns loss lines into (step, loss) with a step that only moves forward."""

    def __init__(self) -> None:
        self.step = 0

    def feed(self, line: str) -> tuple[int, float] | None:
        found = parse_loss(line)
        if found is None:
            return None
        loss, step = found
        self.step = step if step is not None and step > self.step else self.step + 1
        return self.step, loss if math.isfinite(loss) else float("nan")
