"""The Compare tab: several runs' curves overlaid on one chart, and a summary table under it.

Pick the runs in the Runs tab (Ctrl/Shift-click) and press Compare. The x axis
is step, samples seen or wall time since each run's start (the blog's figure);
y is linear or log. Runs are read on a worker (``core.metrics.compare.load``);
while one of them is still training they are read again every few seconds,
so a live run grows on the chart. The numbers come from ``core.metrics.compare``.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QTimer, Signal, Slot
from PySide6.QtGui import QDoubleValidator, QPalette
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QSplitter,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)
from PySide6.QtCore import Qt

from ddpstudio.cli.progress import format_eta
from ddpstudio.core.metrics import compare
from ddpstudio.core.metrics.catalog import KILLED, UNKNOWN
from ddpstudio.core.metrics.compare import Compared, Quantity, XAxis
from ddpstudio.gui.plots import colour
from ddpstudio.gui.workers import Workers

LIVE_RELOAD_MS = 2000
TABLE_ROWS_SHOWN = 6
TABLE_COLUMNS = ("Run", "Duration", "Time to threshold", "Final", "Best", "Samples/s", "Speedup")
X_CHOICES = {"Wall time since start": XAxis.WALL, "Step": XAxis.STEP, "Samples seen": XAxis.SAMPLES}


def _fmt(value: float | None, spec: str = ".4g") -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


class CompareView(QWidget):
    compared = Signal(int)  # how many runs the chart now shows

    def __init__(self, workers: Workers, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workers = workers
        self.run_dirs: list[str] = []
        self.runs: list[Compared] = []
        self.curves: dict[str, pg.PlotDataItem] = {}  # run id -> its curve on the chart
        self._sizes: dict[str, int] = {}  # run id -> bytes in its folder at the last read
        self.quantity_box = QComboBox()
        self.quantity_box.addItems([q.value for q in Quantity])
        self.x_box = QComboBox()
        self.x_box.addItems(list(X_CHOICES))
        self.log_box = QCheckBox("Log y")
        self.threshold = QLineEdit()
        self.threshold.setValidator(QDoubleValidator())
        self.threshold.setPlaceholderText("none")
        self.threshold.setToolTip("The value each run's time to threshold is measured to; by default the worst "
                                  "final value among the runs, so every run reaches it. Train loss is smoothed "
                                  "first (TensorBoard's default EMA, 0.6), so one lucky step does not count")
        self.threshold.setMaximumWidth(90)
        self.note = QLabel("Select runs in the Runs tab (Ctrl/Shift-click) and press Compare.")
        self.note.setWordWrap(True)
        controls = QHBoxLayout()
        for label, widget in (("Show", self.quantity_box), ("against", self.x_box)):
            controls.addWidget(QLabel(label))
            controls.addWidget(widget)
        controls.addWidget(self.log_box)
        controls.addWidget(QLabel("Threshold"))
        controls.addWidget(self.threshold)
        controls.addStretch(1)
        self.plot = pg.PlotWidget()
        palette = self.plot.palette()
        self.plot.setBackground(palette.color(QPalette.ColorRole.Base))
        self._text = palette.color(QPalette.ColorRole.Text)
        item = self.plot.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.2)
        for axis in ("bottom", "left"):
            item.getAxis(axis).setTextPen(self._text)
            item.getAxis(axis).enableAutoSIPrefix(False)
        self.legend = item.addLegend(offset=(-10, 10), labelTextColor=self._text)
        self.table = QTableWidget(0, len(TABLE_COLUMNS))
        self.table.setHorizontalHeaderLabels(TABLE_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(False)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.plot)
        split.addWidget(self.table)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(self.note)
        layout.addWidget(split, 1)
        self.quantity_box.currentIndexChanged.connect(self._on_quantity)
        self.x_box.currentIndexChanged.connect(self.redraw)
        self.log_box.toggled.connect(self.redraw)
        self.threshold.editingFinished.connect(self._fill_table)
        self.reload_timer = QTimer(self)
        self.reload_timer.setInterval(LIVE_RELOAD_MS)
        self.reload_timer.timeout.connect(self._reload)

    # -- what to compare ---------------------------------------------------------
    @property
    def quantity(self) -> Quantity:
        return Quantity(self.quantity_box.currentText())

    @property
    def x_axis(self) -> XAxis:
        return X_CHOICES[self.x_box.currentText()]

    def set_x_axis(self, axis: XAxis) -> None:
        self.x_box.setCurrentText(next(k for k, v in X_CHOICES.items() if v is axis))

    def compare(self, run_dirs: list[str]) -> None:
        """Read these runs (the first is the baseline of the speedups) and draw them."""
        self.run_dirs = list(run_dirs)
        self._sizes = {}
        self.threshold.clear()
        self._reload()

    def _reload(self) -> None:
        dirs = list(self.run_dirs)
        self.workers.submit(lambda: compare.load(dirs), self._on_loaded)

    @Slot(object)
    def _on_loaded(self, runs: list[Compared]) -> None:
        # Read again while a run trains: its launcher is alive, or (launcher not registered yet, or
        # killed) its files still grow between two reads.
        sizes = {r.entry.run_id: r.entry.size_bytes for r in runs}
        growing = [r.entry.run_id for r in runs
                   if r.entry.live or (r.entry.state in (KILLED, UNKNOWN) and self._sizes.get(r.entry.run_id, -1) !=
                                       r.entry.size_bytes)]
        self.runs, self._sizes = runs, sizes
        if growing:
            self.reload_timer.start()
        else:
            self.reload_timer.stop()
        if not self.threshold.text():
            self._default_threshold()
        live = [r.entry.run_id for r in runs if r.entry.live]
        self.note.setText(f"Comparing {len(runs)} run(s)" + (f"; {', '.join(live)} still training, redrawn every "
                                                            f"{LIVE_RELOAD_MS // 1000} s" if live else ""))
        self.redraw()
        self.compared.emit(len(runs))

    def _default_threshold(self) -> None:
        value = compare.default_threshold(self.runs, self.quantity)
        self.threshold.setText("" if value is None else f"{value:.4g}")

    def _on_quantity(self) -> None:
        self.threshold.clear()
        self._default_threshold()
        self.redraw()

    def threshold_value(self) -> float | None:
        try:
            return float(self.threshold.text().replace(",", "."))
        except ValueError:
            return None

    # -- drawing ---------------------------------------------------------------------
    @Slot()
    def redraw(self) -> None:
        item = self.plot.getPlotItem()
        for curve in self.curves.values():
            self.plot.removeItem(curve)
        self.legend.clear()
        self.curves.clear()
        item.setLogMode(x=False, y=self.log_box.isChecked())
        for i, run in enumerate(self.runs):
            data = compare.curve(run.history, self.quantity, self.x_axis)
            self.curves[run.entry.run_id] = self.plot.plot(data.x, data.y, name=run.label, connect="finite",
                                                           pen=pg.mkPen(colour(i), width=2))
        item.setTitle(f"{self.quantity.value} against {compare.X_LABELS[self.x_axis]}", color=self._text)
        item.setLabel("bottom", compare.X_LABELS[self.x_axis])
        item.setLabel("left", self.quantity.value)
        item.enableAutoRange()
        self._fill_table()

    def _fill_table(self) -> None:
        rows = compare.summarize(self.runs, self.quantity, self.threshold_value())
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            speedup = f"{row.speedup:.2f}x ({row.speedup_basis})" if row.speedup is not None else "-"
            cells = (row.label, format_eta(row.duration_s) if row.duration_s is not None else "-",
                     _fmt(row.time_to_threshold_s, ".1f") + (" s" if row.time_to_threshold_s is not None else ""),
                     _fmt(row.final), _fmt(row.best), _fmt(row.samples_per_s, ".1f"), speedup)
            for c, text in enumerate(cells):
                cell = QTableWidgetItem(text)
                if c == 0:
                    cell.setForeground(pg.mkColor(colour(r)))
                self.table.setItem(r, c, cell)
        # As tall as its rows (up to TABLE_ROWS_SHOWN), so the chart gets the rest.
        shown = max(1, min(len(rows), TABLE_ROWS_SHOWN))
        self.table.setFixedHeight(self.table.horizontalHeader().height() + shown * self.table.rowHeight(0)
                                  + 2 * self.table.frameWidth() if rows else 80)
