"""The benchmark's results: the table of measured rows and the speedup bar chart with its ideal line."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QHeaderView, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from ddpstudio.core.bench import BenchResult
from ddpstudio.core.bench.export import TABLE_HEADER, table_cells
from ddpstudio.gui.plots import colour

HEADER = TABLE_HEADER + ("GPU util", "variant")
SPEEDUP_COL, EFFICIENCY_COL = TABLE_HEADER.index("speedup"), TABLE_HEADER.index("efficiency")


class BenchTable(QTableWidget):
    """One row per measured run; speedup and efficiency keep their raw values in ``UserRole``."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(HEADER), parent)
        self.setHorizontalHeaderLabels(HEADER)
        self.verticalHeader().hide()
        self.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

    def show_result(self, result: BenchResult) -> None:
        self.setRowCount(len(result.rows))
        for i, row in enumerate(result.rows):
            gpu = f"{row.gpu_util_pct:.0f}%" if row.gpu_util_pct is not None else "n/a"
            for j, text in enumerate(table_cells(row) + (gpu, row.variant)):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                raw = {SPEEDUP_COL: row.speedup, EFFICIENCY_COL: row.efficiency}.get(j)
                if raw is not None:
                    item.setData(Qt.ItemDataRole.UserRole, raw)
                if row.error:
                    item.setToolTip(row.error)
                self.setItem(i, j, item)
        self.setColumnHidden(len(HEADER) - 1, len(result.variants) < 2)


class SpeedupChart(QWidget):
    """Bars of speedup per world size (one colour per variant) and the dashed ideal line."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.widget = pg.PlotWidget()
        text = self.widget.palette().color(QPalette.ColorRole.Text)
        self.widget.setBackground(self.widget.palette().color(QPalette.ColorRole.Base))
        item = self.widget.getPlotItem()
        item.setTitle("Speedup against the ideal", color=text)
        item.setLabel("bottom", "ranks")
        item.setLabel("left", "speedup (x)")
        for axis in ("bottom", "left"):
            item.getAxis(axis).setTextPen(text)
        item.setMenuEnabled(False)
        item.setMouseEnabled(False, False)
        self.legend = item.addLegend(offset=(10, 10), labelTextColor=text)
        self.text = text
        self.bars: list[pg.BarGraphItem] = []
        self.labels: list[pg.TextItem] = []  # speedup and efficiency above each bar
        self.ideal = self.widget.plot([], [], name="ideal", symbol="o", symbolSize=6,
                                      pen=pg.mkPen("#c62828", width=2, style=Qt.PenStyle.DashLine),
                                      symbolBrush="#c62828", symbolPen=None)
        self.ideal.setZValue(10)  # over the bars
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.widget)

    def bar_count(self) -> int:
        return sum(len(bar.opts["height"]) for bar in self.bars)

    def show_result(self, result: BenchResult | None) -> None:
        for bar in self.bars:
            self.widget.removeItem(bar)
            self.legend.removeItem(bar)
        for label in self.labels:
            self.widget.removeItem(label)
        self.bars, self.labels = [], []
        sizes = sorted({r.world_size for r in result.rows}) if result else []
        if not sizes:
            self.ideal.setData([], [])
            return
        slot = {ws: i for i, ws in enumerate(sizes)}  # one slot per world size, evenly spaced
        variants = result.variants
        width = 0.7 / len(variants)
        for v, variant in enumerate(variants):
            rows = [r for r in result.rows_of(variant) if r.speedup is not None]
            x = [slot[r.world_size] - 0.35 + width * (v + 0.5) for r in rows]
            bar = pg.BarGraphItem(x=x, height=[r.speedup for r in rows], width=width * 0.9,
                                  brush=colour(v), pen=None, name=variant)
            self.widget.addItem(bar)  # named: the legend lists it
            self.bars.append(bar)
            for x_, row in zip(x, rows):
                label = pg.TextItem(f"{row.speedup:.2f}x · {100 * row.efficiency:.0f}%", color=self.text,
                                    anchor=(0.5, 1.0))
                label.setPos(x_, row.speedup)
                self.widget.addItem(label)
                self.labels.append(label)
        base = min(sizes)
        self.ideal.setData([slot[ws] for ws in sizes], [ws / base for ws in sizes])
        self.widget.getPlotItem().getAxis("bottom").setTicks([[(i, str(ws)) for ws, i in slot.items()]])
        self.widget.getPlotItem().setXRange(-0.6, len(sizes) - 0.4, padding=0)
