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
        self.curves[key] = self.widget.plot([], [], name=name, pen=pen, connect="finite")
        return self.curves[key]

    def draw(self, key: object, series: Series) -> bool:
        if self.drawn.get(key) == series.version:
            return False
        x, y = series.data()
        self.curves[key].setData(x, y, connect="finite")
        self.drawn[key] = series.version
        return True

    def settle(self) -> None:
        """Auto-range and transform now rather than while painting, where a change costs a second paint."""
        view = self.widget.getPlotItem().getViewBox()
        view.updateAutoRange()
        view.updateMatrix()

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
        self._turn = 0  # the plot whose turn it is to be redrawn first

    # -- what to show ----------------------------------------------------------
    def show_run(self, metrics: RunMetrics | None) -> None:
        """Plot this run's curves (a live run, or a past one reopened)."""
        self.metrics = metrics
        self.loss.clear()
        self.rate.clear()
        self.refresh_all()

    def show_load(self, history: LoadHistory, cpu_mode: bool, gpu_memory_gib: float | None = None) -> None:
        """The machine's load: per rank on the CPU, per GPU (on fixed scales, so 94% does not look empty)."""
        self.history = history
        if cpu_mode != self.cpu_mode:
            self.cpu_mode = cpu_mode
            self.load.clear()
            self.memory.clear()
            if cpu_mode:
                self.load.set_title("CPU load per rank", "% of one core")
                self.memory.set_title("Memory per rank", "MiB")
                for plot in (self.load, self.memory):
                    plot.widget.enableAutoRange(y=True)
            else:
                self.load.set_title("GPU utilisation", "%")
                self.memory.set_title("GPU memory used", "GiB")
                self.load.widget.setYRange(0, 100, padding=0.02)
                if gpu_memory_gib:
                    self.memory.widget.setYRange(0, gpu_memory_gib, padding=0.02)
        self.refresh_all()

    # -- drawing (the render timer calls this) ----------------------------------
    def _wanted(self) -> list[tuple[_Plot, list[tuple[object, str, object, float, Series]]]]:
        """Each plot with its curves: (key, legend name, colour, width, series)."""
        loss, rate, load, memory = [], [], [], []
        m = self.metrics
        if m is not None:
            loss += [(rank, f"rank {rank}", colour(rank), 1, series) for rank, series in sorted(m.loss.items())]
            if m.global_loss.last is not None:
                loss.append(("global", "global mean", self.loss.text, 2, m.global_loss))
            if m.samples_per_s.last is not None:
                rate.append(("global", "all ranks", colour(2), 2, m.samples_per_s))
        h = self.history
        if h is not None and self.cpu_mode is not None:
            what = "rank" if self.cpu_mode else "GPU"
            tables = (h.cpu_pct, h.rss_mb) if self.cpu_mode else (h.gpu_util, h.gpu_mem_gb)
            for curves, table in zip((load, memory), tables):
                curves += [(key, f"{what} {key}", colour(key), 1.5, s) for key, s in sorted(table.items())]
        return [(self.loss, loss), (self.rate, rate), (self.load, load), (self.memory, memory)]

    def refresh(self, plots: int = 1) -> bool:
        """Redraw at most ``plots`` plots whose series changed, taking turns, so that one tick
        never repaints everything at once; returns whether anything was drawn."""
        wanted = self._wanted()
        drawn = 0
        for i in [(self._turn + k) % len(wanted) for k in range(len(wanted))]:
            plot, curves = wanted[i]
            if drawn >= plots:
                break
            if not any(plot.drawn.get(key) != series.version for key, _, _, _, series in curves):
                continue
            for key, name, pen_colour, width, series in curves:
                if key not in plot.curves:
                    plot.curve(key, name, pg.mkPen(pen_colour, width=width))
                plot.draw(key, series)
            plot.settle()
            drawn += 1
            self._turn = (i + 1) % len(wanted)
        return drawn > 0

    def refresh_all(self) -> None:
        self.refresh(plots=4)
