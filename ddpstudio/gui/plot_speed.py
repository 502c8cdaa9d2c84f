"""While the window is being resized, the live plots leave out their grid lines.

Measured by benchmarks/gui_resize.py (old and new settings interleaved in one
run): a resize frame repaints every plot at its new size, and each axis
regenerates its picture (tick text and, with the grid on, a full-width line
per tick). Leaving the grid out while the user drags the window edge, and
bringing it back ``SETTLE_MS`` after the last resize, takes a few ms (about
10% on the 2-core VM) off each frame. The curves are not the cost: peak
downsampling already draws at most 2 points per bucket and a series holds at
most 1,024 points, so drawing fewer points per pixel changed nothing measurable.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, QTimer

SETTLE_MS = 200
GRID_ALPHA = 0.25


@dataclass(frozen=True)
class PlotSpeed:
    """The settings the resize benchmark compares: ``NEW`` is what the window uses."""

    grid_while_resizing: bool


OLD = PlotSpeed(grid_while_resizing=True)
NEW = PlotSpeed(grid_while_resizing=False)


class ResizeLean(QObject):
    """Watches a widget's resizes; drops the plots' grids while they come, restores them after."""

    def __init__(self, watched, plots, speed: PlotSpeed = NEW) -> None:
        super().__init__(watched)
        self.plots, self.speed, self.lean = plots, speed, False
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(SETTLE_MS)
        self.timer.timeout.connect(self.settle)
        watched.installEventFilter(self)

    def set_speed(self, speed: PlotSpeed) -> None:
        self.speed = speed
        if speed.grid_while_resizing:
            self.settle()

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        # Only a shown widget changing size: the first layout of a new window keeps its grid.
        if (event.type() == QEvent.Type.Resize and not self.speed.grid_while_resizing and watched.isVisible()
                and event.oldSize().isValid()):
            if not self.lean:
                self.lean = True
                for plot in self.plots:
                    plot.item.showGrid(x=False, y=False)
            self.timer.start()
        return False

    def settle(self) -> None:
        """The resizing stopped: the grids come back (one full repaint)."""
        self.timer.stop()
        if self.lean:
            self.lean = False
            for plot in self.plots:
                plot.item.showGrid(x=True, y=True, alpha=GRID_ALPHA)
