"""Advice while a run trains: low GPU load or a data-starved loader, looked at every few seconds."""

from __future__ import annotations

import time

from ddpstudio.core.hints import low_load_hint
from ddpstudio.gui.load_history import LOW_LOAD_WINDOW_S, LoadHistory
from ddpstudio.gui.run_metrics import RunMetrics

ADVICE_EVERY_S = 5.0


class LoadAdvisor:
    def __init__(self, history: LoadHistory) -> None:
        self.history = history
        self._began = self._last = 0.0

    def begin(self) -> None:
        """A run starts: GPU load counts only after a full window of it."""
        self._began = self._last = time.monotonic()

    def advice(self, metrics: RunMetrics | None, gpu_mode: bool) -> str | None:
        """The hint that applies now, or None (also when it is too soon to look again)."""
        now = time.monotonic()
        if metrics is None or now - self._last < ADVICE_EVERY_S or not metrics.step:
            return None
        self._last = now
        util = self.history.mean_gpu_util() if gpu_mode and now - self._began > LOW_LOAD_WINDOW_S else None
        return low_load_hint(util, metrics.data_wait_fraction)
