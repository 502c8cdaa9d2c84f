"""What keeps the live plots cheap while the window is being resized.

Measured by benchmarks/gui_resize.py (settings interleaved in one run): a
resize frame lays out and repaints every plot at its new size (the six plots
are about 33 of a frame's 42 ms of CPU on the 2-core VM; a repaint at an
unchanged size costs 2.6 ms), and the curves are not the cost (peak
downsampling of at most 1,024 points per series). So while the user drags
the window edge, :class:`ResizeCurtain` shows the plots' last picture scaled
to the new size and lays them out once, ``SETTLE_MS`` after the last resize;
and the grid is left out meanwhile (:class:`ResizeLean`, a few ms per frame
when the plots are laid out live).
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtGui import QPainter, QPixmap
from PySide6.QtWidgets import QWidget

SETTLE_MS = 200
GRID_ALPHA = 0.25


@dataclass(frozen=True)
class PlotSpeed:
    """The settings the resize benchmark compares: ``NEW`` is what the window uses."""

    grid_while_resizing: bool
    live_layout_while_resizing: bool = False  # False: the curtain shows a scaled picture until it stops


OLD = PlotSpeed(grid_while_resizing=True, live_layout_while_resizing=True)
NO_GRID = PlotSpeed(grid_while_resizing=False, live_layout_while_resizing=True)
NEW = PlotSpeed(grid_while_resizing=False, live_layout_while_resizing=False)


def _resizing(widget: QWidget, event) -> bool:
    """A shown widget changing size: the first layout of a new window is not a resize to defer."""
    return widget.isVisible() and event.oldSize().isValid()


class ResizeCurtain(QWidget):
    """Holds ``body`` at its own size; while its size keeps changing it paints the body's last picture
    scaled instead, and lays the body out once the resizing has stopped for ``SETTLE_MS``."""

    def __init__(self, body: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.body = body
        body.setParent(self)
        self.live = False  # True: lay the body out on every resize (the benchmark's "before")
        self.snapshot: QPixmap | None = None
        self._window_size = None  # the top-level window's size at the last resize
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(SETTLE_MS)
        self.timer.timeout.connect(self.settle)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        # Only the window being resized is deferred; a card or banner appearing inside it is laid out at once.
        window_size = self.window().size()
        window_resized, self._window_size = window_size != self._window_size, window_size
        if self.live or not window_resized or not _resizing(self, event):
            self.settle()
            self.body.setGeometry(self.rect())
            return
        if self.snapshot is None:
            self.snapshot = self.body.grab()  # cheap: nothing changed size yet, every picture is cached
            self.body.hide()
        self.timer.start()
        self.update()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        if self.snapshot is not None:
            QPainter(self).drawPixmap(self.rect(), self.snapshot)

    def settle(self) -> None:
        """The resizing stopped: the plots are laid out at the final size and shown (one full frame)."""
        self.timer.stop()
        if self.snapshot is not None:
            self.snapshot = None
            self.body.setGeometry(self.rect())
            self.body.show()
            self.update()


class ResizeLean(QObject):
    """Watches a widget's resizes; drops the plots' grids while they come, restores them after."""

    def __init__(self, watched, plots, curtain: ResizeCurtain | None = None, speed: PlotSpeed = NEW) -> None:
        super().__init__(watched)
        self.plots, self.curtain, self.speed, self.lean = plots, curtain, speed, False
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(SETTLE_MS)
        self.timer.timeout.connect(self.settle)
        watched.installEventFilter(self)

    def set_speed(self, speed: PlotSpeed) -> None:
        self.speed = speed
        if speed.grid_while_resizing:
            self.settle()
        if self.curtain is not None:
            self.curtain.live = speed.live_layout_while_resizing
            if self.curtain.live:
                self.curtain.settle()

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Resize and not self.speed.grid_while_resizing and _resizing(watched, event):
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
