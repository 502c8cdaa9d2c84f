"""The live plots' grid: two columns where both fit, else one, and a vertical scroll where the rows do not.

Issue 24: at 1280x720 (also 150 % scaling on a 1920x1080 laptop screen, the
same logical size) and 1366x768 a fixed 2x3 grid cut the loss plot's right
side off (its three-column legend needs about 340 px) and squashed the load
plots to about 30 px. Here each plot keeps at least its own minimum size
(axes, title, legend) plus a readable view, the columns follow the width,
and the rows scroll rather than shrink.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QScrollArea, QWidget

MIN_PLOT_W = 300  # px: below this a plot's ticks crowd, even where its legend would fit
VIEW_H = 100  # px of curves (the view box) on top of a plot's title, axes and legend
SPACING = 2


class PlotGrid(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)  # the sheet takes the viewport's size, never less than its minimum
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.sheet = QWidget()
        self.grid = QGridLayout(self.sheet)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(SPACING)
        self.setWidget(self.sheet)
        self.shown: tuple[QWidget, ...] = ()
        self.columns = 0

    def place(self, widgets: tuple[QWidget, ...]) -> None:
        """Show these widgets, in this order, row by row."""
        self.shown = tuple(widgets)
        self._lay_out(force=True)

    def fit(self, widget: QWidget, content: QSize) -> None:
        """A plot's smallest readable size: ``content`` (its title, axes and legend) plus a view of curves."""
        widget.setMinimumSize(max(MIN_PLOT_W, content.width() + 4), content.height() + VIEW_H)
        self._lay_out()

    def columns_for(self, width: int) -> int:
        """Two columns when the widest plot fits twice side by side, else one."""
        widest = max((w.minimumWidth() for w in self.shown), default=MIN_PLOT_W)
        return 2 if width >= 2 * widest + SPACING else 1

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._lay_out()

    def _lay_out(self, force: bool = False) -> None:
        # The width a vertical scroll bar would leave: the same columns whether or not the rows scroll.
        columns = self.columns_for(self.width() - self.verticalScrollBar().sizeHint().width())
        if columns == self.columns and not force:
            return
        self.columns = columns
        for i in reversed(range(self.grid.count())):
            self.grid.takeAt(i)
        for i, widget in enumerate(self.shown):
            self.grid.addWidget(widget, i // columns, i % columns)
        for c in range(2):
            self.grid.setColumnStretch(c, 1 if c < columns else 0)
        for r in range(6):
            self.grid.setRowStretch(r, 1 if r < math.ceil(len(self.shown) / columns) else 0)
