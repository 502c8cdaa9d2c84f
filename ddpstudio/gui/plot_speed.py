"""What keeps the live plots cheap to redraw while the window is being resized.

Measured by benchmarks/gui_resize.py (old and new settings interleaved in one
run): a resize frame repaints every plot at its new size, and on the 2-core VM
the axes (tick text and grid lines) cost about half of it, the curves little.
So while the user drags the window edge the grid is left out (each grid line
is a full-width line replayed from every axis's picture), and it comes back
``SETTLE_MS`` after the last resize; and curves are peak-downsampled to about
``POINTS_PER_PIXEL`` points per pixel column instead of pyqtgraph's default 5.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, QTimer

SETTLE_MS = 200
GRID_ALPHA = 0.25
POINTS_PER_PIXEL = 1.0  # peak mode keeps each bucket's min and max, so spikes still show
PYQTGRAPH_POINTS_PER_PIXEL = 5.0  # pyqtgraph's own autoDownsampleFactor


@dataclass(frozen=True)
class PlotSpeed:
    """The settings the resize benchmark compares: ``NEW`` is what the window uses."""

    points_per_pixel: float
    grid_while_resizing: bool


OLD = PlotSpeed(points_per_pixel=PYQTGRAPH_POINTS_PER_PIXEL, grid_while_resizing=True)
NEW = PlotSpeed(points_per_pixel=POINTS_PER_PIXEL, grid_while_resizing=False)


def set_points_per_pixel(curve, factor: float) -> None:
    """How many points a curve draws per pixel column (pyqtgraph's autoDownsampleFactor)."""
    if curve.opts.get("autoDownsampleFactor") == factor:
        return
    curve.opts["autoDownsampleFactor"] = factor
    curve.setDownsampling(auto=False)  # toggling is pyqtgraph's public way to drop its downsampled cache
    curve.setDownsampling(auto=True)


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
        for plot in self.plots:
            plot.points_per_pixel = speed.points_per_pixel
            for curve in (*plot.curves.values(), *plot.raw.values()):
                set_points_per_pixel(curve, speed.points_per_pixel)

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
