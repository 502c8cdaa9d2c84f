"""A plot series in bounded memory: full resolution until it fills, then evenly thinned.

When the buffer is full, neighbouring points are averaged in pairs and from
then on every ``stride`` incoming points are averaged into one. A run of a
million steps therefore keeps its whole curve at a uniform resolution of at
most ``capacity`` points, and memory never grows.
"""

from __future__ import annotations

import math

import numpy as np


class Series:
    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 4 or capacity % 2:
            raise ValueError("capacity must be an even number of at least 4")
        self.capacity = capacity
        self._x = np.empty(capacity)
        self._y = np.empty(capacity)
        self._n = 0
        self.stride = 1
        self._acc = [0.0, 0.0, 0]  # x sum, y sum, count of the point being averaged
        self.version = 0  # bumps on every append: the render timer redraws what changed
        self.last: tuple[float, float] | None = None

    def __len__(self) -> int:
        return self._n

    def append(self, x: float, y: float | None) -> None:
        y = math.nan if y is None else float(y)
        self.version += 1
        self.last = (float(x), y)
        if self.stride > 1:
            acc = self._acc
            acc[0] += x
            acc[1] += y
            acc[2] += 1
            if acc[2] < self.stride:
                return
            x, y = acc[0] / acc[2], acc[1] / acc[2]
            self._acc = [0.0, 0.0, 0]
        self._x[self._n] = x
        self._y[self._n] = y
        self._n += 1
        if self._n == self.capacity:
            self._halve()

    def _halve(self) -> None:
        half = self.capacity // 2
        self._x[:half] = (self._x[0::2] + self._x[1::2]) / 2
        self._y[:half] = (self._y[0::2] + self._y[1::2]) / 2
        self._n = half
        self.stride *= 2

    def data(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the stored points, plus the newest raw point so the curve's end is live."""
        n = self._n
        x, y = self._x[:n], self._y[:n]
        if self._acc[2] and self.last is not None:
            x, y = np.append(x, self.last[0]), np.append(y, self.last[1])
        else:
            x, y = x.copy(), y.copy()
        return x, y

    def drop_after(self, x: float) -> None:
        """Forget the points past ``x`` (a restart trains those steps again); x must grow along the series."""
        keep = int(np.searchsorted(self._x[:self._n], x, side="right"))
        if keep == self._n and not (self.last is not None and self.last[0] > x):
            return
        self._n, self._acc = keep, [0.0, 0.0, 0]
        self.last = (float(self._x[keep - 1]), float(self._y[keep - 1])) if keep else None
        self.version += 1

    def clear(self) -> None:
        self._n, self.stride, self._acc, self.last = 0, 1, [0.0, 0.0, 0], None
        self.version += 1
