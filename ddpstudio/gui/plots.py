"""The live plots: loss per rank and global, samples/s, and the machine's load.

Curve items are made once per series and kept; :meth:`LivePlots.refresh`
(called by the window's one render timer) calls ``setData`` only for series
whose version moved since the last draw. Series are bounded (``Series``), and
pyqtgraph clips to the view and downsamples, so long runs stay smooth.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QGridLayout, QWidget

from ddpstudio.gui.load_history import LoadHistory
from ddpstudio.gui.run_metrics import RunMetrics
from ddpstudio.gui.series import Series

# Colour-blind-safe (Okabe-Ito) colours for ranks and GPUs; the global mean is drawn thick in the text colour.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")


def colour(i: int) -> str:
    return COLOURS[i % len(COLOURS)]


class _Plot:
    """One PlotWidget and the curves on it, keyed by whatever names the series."""

    def __init__(self, title: str, x_label: str, y_label: str) -> None:
        self.widget = pg.PlotWidget()
        palette = self.widget.palette()
        self.widget.setBackground(palette.color(QPalette.ColorRole.Base))
        self.text = palette.color(QPalette.ColorRole.Text)
        item = self.widget.getPlotItem()
        item.setTitle(title, color=self.text)
        item.setLabel("bottom", x_label)
        item.setLabel("left", y_label)
        for axis in ("bottom", "left"):
            item.getAxis(axis).setTextPen(self.text)
            item.getAxis(axis).enableAutoSIPrefix(False)  # "GiB (x0.001)" reads badly
        item.showGrid(x=True, y=True, alpha=0.15)
        item.setClipToView(True)
        item.setDownsampling(auto=True, mode="peak")
        item.setMenuEnabled(False)
        self.legend = item.addLegend(offset=(-10, 10), labelTextColor=self.text)
        self.curves: dict[object, pg.PlotDataItem] = {}
        self.drawn: dict[object, int] = {}

    def set_title(self, title: str, y_label: str) -> None:
        item = self.widget.getPlotItem()
        item.setTitle(title, color=self.text)
        item.setLabel("left", y_label)

    def curve(self, key: object, name: str, pen) -> pg.PlotDataItem:
        if key not in self.curves:
            self.curves[key] = self.widget.plot([], [], name=name, pen=pen, connect="finite")
        return self.curves[key]

    def draw(self, key: object, series: Series) -> bool:
        if self.drawn.get(key) == series.version:
            return False
        x, y = series.data()
        self.curves[key].setData(x, y, connect="finite")
        self.drawn[key] = series.version
        return True

    def clear(self) -> None:
        for curve in self.curves.values():
            self.widget.removeItem(curve)
        self.legend.clear()
        self.curves.clear()
        self.drawn.clear()


class LivePlots(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.loss = _Plot("Loss", "step", "loss")
        self.rate = _Plot("Throughput", "step", "samples/s")
        self.load = _Plot("Load", "time (s)", "%")
        self.memory = _Plot("Memory", "time (s)", "GiB")
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        for i, plot in enumerate((self.loss, self.rate, self.load, self.memory)):
            grid.addWidget(plot.widget, i // 2, i % 2)
        self.metrics: RunMetrics | None = None
        self.history: LoadHistory | None = None
        self.cpu_mode: bool | None = None

    # -- what to show ----------------------------------------------------------
    def show_run(self, metrics: RunMetrics | None) -> None:
        """Plot this run's curves (a live run, or a past one reopened)."""
        self.metrics = metrics
        self.loss.clear()
        self.rate.clear()
        self.refresh()

    def show_load(self, history: LoadHistory, cpu_mode: bool) -> None:
        self.history = history
        if cpu_mode != self.cpu_mode:
            self.cpu_mode = cpu_mode
            self.load.clear()
            self.memory.clear()
            if cpu_mode:
                self.load.set_title("CPU load per rank", "% of one core")
                self.memory.set_title("Memory per rank", "MiB")
            else:
                self.load.set_title("GPU utilisation", "%")
                self.memory.set_title("GPU memory used", "GiB")
        self.refresh()

    # -- drawing (the render timer calls this) ----------------------------------
    def refresh(self) -> bool:
        """Redraw the series that changed; returns whether anything was drawn."""
        changed = False
        m = self.metrics
        if m is not None:
            for rank, series in sorted(m.loss.items()):
                self.loss.curve(rank, f"rank {rank}", pg.mkPen(colour(rank), width=1))
                changed |= self.loss.draw(rank, series)
            if len(m.global_loss) or m.global_loss.last is not None:
                self.loss.curve("global", "global mean", pg.mkPen(self.loss.text, width=2.5))
                changed |= self.loss.draw("global", m.global_loss)
            if m.samples_per_s.last is not None:
                self.rate.curve("global", "all ranks", pg.mkPen(colour(2), width=2))
                changed |= self.rate.draw("global", m.samples_per_s)
        h = self.history
        if h is not None and self.cpu_mode is not None:
            load, memory = (h.cpu_pct, h.rss_mb) if self.cpu_mode else (h.gpu_util, h.gpu_mem_gb)
            what = "rank" if self.cpu_mode else "GPU"
            for key, series in sorted(load.items()):
                self.load.curve(key, f"{what} {key}", pg.mkPen(colour(key), width=1.5))
                changed |= self.load.draw(key, series)
            for key, series in sorted(memory.items()):
                self.memory.curve(key, f"{what} {key}", pg.mkPen(colour(key), width=1.5))
                changed |= self.memory.draw(key, series)
        return changed
