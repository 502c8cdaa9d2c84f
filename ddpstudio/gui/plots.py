"""The live plots: loss (train and eval), accuracy, samples/s, learning rate, and the machine's load.

Curve items are made once per series and kept; :meth:`LivePlots.refresh`
(called by the window's one render timer) calls ``setData`` only for series
whose version moved since the last draw. Series are bounded (``Series``), and
pyqtgraph clips to the view and downsamples, so long runs stay smooth; while
the window is being resized the plots sit behind a ``ResizeCurtain``
(plot_speed.py; benchmarks/gui_resize.py measures it at 2,000 events/s).
Loss and throughput can be smoothed (TensorBoard's EMA, the raw curve faint
behind); every plot has a grid, its legend under the axes, pyqtgraph's
context menu (export included) and a hover read-out.
"""

from __future__ import annotations

import time

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ddpstudio.gui.load_history import LoadHistory
from ddpstudio.gui.plot_grid import PlotGrid
from ddpstudio.gui.plot_hover import HoverReadout
from ddpstudio.gui.plot_speed import GRID_ALPHA, ResizeCurtain, ResizeLean
from ddpstudio.gui.plot_toolbar import PlotToolbar
from ddpstudio.gui.run_metrics import RunMetrics
from ddpstudio.gui.series import Series
from ddpstudio.gui.smoothing import ema

# Colour-blind-safe (Okabe-Ito) colours for ranks and GPUs; the global mean is drawn thick in the text colour.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")
IDLE_TIME_LABEL, RUN_TIME_LABEL = "time since the window opened (s)", "time since the run started (s)"
RAW_ALPHA = 60  # of 255: the unsmoothed curve behind a smoothed one, as TensorBoard draws it
EMPTY_HINT = ("Nothing measured yet. Once a run trains, these plots show the loss per rank and its mean, the "
              "throughput and the machine's load (and, for the built-in recipe, validation accuracy and the "
              "learning rate). Set up a run on the left and press Launch (F5), or reopen a past run in the Runs "
              "tab.")


def colour(i: int) -> str:
    return COLOURS[i % len(COLOURS)]


class _Plot:
    """One PlotWidget and the curves on it, keyed by whatever names the series."""

    def __init__(self, title: str, x_label: str, y_label: str, smoothable: bool = False,
                 flat_from_zero: bool = False) -> None:
        self.widget = pg.PlotWidget()
        self.name, self.smoothable, self.smoothing = title, smoothable, 0.0
        self.flat_from_zero = flat_from_zero  # a constant value is drawn from 0 to twice itself (_fit_flat)
        palette = self.widget.palette()
        self.widget.setBackground(palette.color(QPalette.ColorRole.Base))
        self.text = palette.color(QPalette.ColorRole.Text)
        item = self.item = self.widget.getPlotItem()
        item.setTitle(title, color=self.text)
        item.setLabel("bottom", x_label)
        item.setLabel("left", y_label)
        for axis in ("bottom", "left"):
            item.getAxis(axis).setTextPen(self.text)
            item.getAxis(axis).enableAutoSIPrefix(False)  # "GiB (x0.001)" reads badly
            # Grid lines at the labelled ticks only: the finest level doubled an axis's paint time.
            item.getAxis(axis).setStyle(maxTickLevel=1)
        item.setClipToView(True)
        item.setDownsampling(auto=True, mode="peak")
        item.showGrid(x=True, y=True, alpha=GRID_ALPHA)
        item.setMenuEnabled(True)  # pyqtgraph's own menu: view range, log axes, Export… (PNG/SVG/CSV)
        # The legend under the x axis (row 4 of PlotItem's grid), never over the curves.
        self.legend = pg.LegendItem(colCount=3, labelTextColor=self.text, verSpacing=-6)
        item.layout.addItem(self.legend, 4, 1)
        item.legend = self.legend  # named curves join it, as with addLegend()
        self.curves: dict[object, pg.PlotDataItem] = {}
        self.raw: dict[object, pg.PlotDataItem] = {}  # faint unsmoothed curves of smoothable plots
        self.drawn: dict[object, tuple] = {}
        self.symbols: dict[object, str | None] = {}  # each curve's own marker (None: a line)
        self.flat_range = False  # the y range was set for a flat curve (see settle)
        self.hover = HoverReadout(self)

    def set_title(self, title: str, y_label: str) -> None:
        self.item.setTitle(title, color=self.text)
        self.item.setLabel("left", y_label)

    def curve(self, key: object, name: str, pen, symbol: str | None = None) -> pg.PlotDataItem:
        """A curve; on a smoothable plot, lines get a faint raw twin, marked points (measurements) do not."""
        if self.smoothable and symbol is None:
            raw_pen = pg.mkPen(pen)
            faint = raw_pen.color()
            faint.setAlpha(RAW_ALPHA)
            raw_pen.setColor(faint)
            self.raw[key] = self.widget.plot([], [], pen=raw_pen, connect="finite")
            self.raw[key].opts["name"] = f"{name} (raw)"  # named for CSV export, kept out of the legend
        self.curves[key] = self.widget.plot([], [], name=name, pen=pen, connect="finite", symbol=symbol,
                                            symbolSize=6, symbolBrush=pen.color(), symbolPen=None)
        self.symbols[key] = symbol
        return self.curves[key]

    def draw(self, key: object, series: Series, x_offset: float = 0.0) -> bool:
        stamp = (series.version, self.smoothing, x_offset)
        if self.drawn.get(key) == stamp:
            return False
        x, y = series.data()
        if x_offset:
            keep = x >= x_offset
            x, y = x[keep] - x_offset, y[keep]
        raw = self.raw.get(key)
        if raw is not None:
            raw.setVisible(self.smoothing > 0)
            if self.smoothing > 0:
                raw.setData(x, y, connect="finite")
                y = ema(y, self.smoothing)
        # A line through one point draws nothing (issue 24: step 1 was invisible): mark it until a second comes.
        symbol = self.symbols.get(key) or ("o" if np.count_nonzero(np.isfinite(y)) == 1 else None)
        if self.curves[key].opts["symbol"] != symbol:
            self.curves[key].setSymbol(symbol)
        self.curves[key].setData(x, y, connect="finite")
        self.drawn[key] = stamp
        return True

    def settle(self) -> None:
        """Auto-range and transform now rather than while painting, where a change costs a second paint."""
        if self.flat_from_zero:
            self._fit_flat()
        view = self.item.getViewBox()
        view.updateAutoRange()
        view.updateMatrix()

    def _fit_flat(self) -> None:
        """A positive value that never changes (a constant learning rate) is drawn mid-plot from 0 to twice
        itself, not at the bottom of pyqtgraph's ±0.5 around it (issue 24: 0.02 on an axis from -0.4)."""
        ys = [c.yData for c in self.curves.values() if c.yData is not None and len(c.yData)]
        values = np.concatenate(ys) if ys else np.array([])
        values = values[np.isfinite(values)]
        flat = bool(len(values)) and values.min() == values.max() and values[0] > 0
        if flat:
            self.item.setYRange(0.0, 2 * float(values[0]), padding=0)
        elif self.flat_range:
            self.item.enableAutoRange(y=True)
        self.flat_range = flat

    def reset_view(self) -> None:
        self.item.enableAutoRange(x=True, y=True)

    def clear(self) -> None:
        for curve in (*self.curves.values(), *self.raw.values()):
            self.widget.removeItem(curve)
        self.legend.clear()
        self.curves.clear()
        self.raw.clear()
        self.drawn.clear()
        self.symbols.clear()
        self.hover.hide()
        # Autorange keeps the last range when there is no data: a run that fails before its first step
        # would show the previous run's axes (issue 24).
        view = self.item.getViewBox()
        view.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
        view.enableAutoRange(x=True, y=True)  # setRange turned it off; without data it keeps 0-1
        self.flat_range = False


class LivePlots(QWidget):
    def __init__(self, parent: QWidget | None = None, dialogs=None) -> None:
        super().__init__(parent)
        self.dialogs = dialogs  # the window sets it: Export asks for a file name through it
        self.loss = _Plot("Loss", "step", "loss", smoothable=True)
        self.accuracy = _Plot("Validation accuracy", "step", "%")
        self.rate = _Plot("Throughput", "step", "samples/s", smoothable=True)
        self.lr = _Plot("Learning rate", "step", "LR", flat_from_zero=True)
        self.load = _Plot("Load", IDLE_TIME_LABEL, "%")
        self.memory = _Plot("Memory", IDLE_TIME_LABEL, "GiB")
        self.all = (self.loss, self.accuracy, self.rate, self.lr, self.load, self.memory)
        self.metrics: RunMetrics | None = None
        self.history: LoadHistory | None = None
        self.cpu_mode: bool | None = None
        self.run_t0: float | None = None  # wall time the shown live run started: the load plots' zero
        self._turn = 0  # the plot whose turn it is to be redrawn first
        self.toolbar = PlotToolbar(self)
        self.hint = QLabel(EMPTY_HINT)  # the empty state says what will appear here and how to start
        self.hint.setWordWrap(True)
        self.hint.setAccessibleName("What the plots will show")
        self.body = PlotGrid()  # the plots' grid, inside a curtain that defers its layout while resizing
        self.curtain = ResizeCurtain(self.body)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.toolbar)
        layout.addWidget(self.hint)
        layout.addWidget(self.curtain, 1)
        self._placed: tuple | None = None
        self._show_optional()
        self.resize_lean = ResizeLean(self, self.all, self.curtain)  # see plot_speed.py

    # -- what to show ----------------------------------------------------------
    def show_run(self, metrics: RunMetrics | None) -> None:
        """Plot this run's curves (a live run, or a past one reopened); the axes start afresh."""
        self.metrics = metrics
        if metrics is not None and metrics.final is None and metrics.step == 0:
            self.run_t0 = time.time()  # a run about to start: the load plots count from now
            for plot in (self.load, self.memory):
                plot.item.setLabel("bottom", RUN_TIME_LABEL)
        for plot in (self.loss, self.accuracy, self.rate, self.lr):
            plot.clear()
        for plot in self.all:
            plot.reset_view()
        self._show_optional()
        self.refresh_all()

    def show_load(self, history: LoadHistory, cpu_mode: bool, gpu_memory_gib: float | None = None) -> None:
        """The machine's load: per rank on the CPU, per GPU (on fixed scales, so 94% does not look empty)."""
        self.history = history
        since = RUN_TIME_LABEL if history.from_run or self.run_t0 is not None else IDLE_TIME_LABEL
        for plot in (self.load, self.memory):
            plot.item.setLabel("bottom", since)
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

    # -- the toolbar's settings --------------------------------------------------
    def set_smoothing(self, weight: float) -> None:
        for plot in self.all:
            if plot.smoothable:
                plot.smoothing = weight
        self.refresh_all()

    def set_log_y(self, on: bool) -> None:
        """Log scale for the loss plot (train and eval loss span decades)."""
        self.loss.item.setLogMode(x=False, y=on)
        self.loss.reset_view()

    def reset_view(self) -> None:
        for plot in self.all:
            plot.reset_view()

    # -- drawing (the render timer calls this) ----------------------------------
    def _load_offset(self) -> float:
        """The window's load history counts from its first sample; the plots count from the live run's start.
        A past run's history already counts from that run's start (issue 24: subtracting the live run's
        start from it dropped every point once anything had been launched)."""
        h = self.history
        if self.run_t0 is None or h is None or h.t0 is None or h.from_run:
            return 0.0
        return max(0.0, self.run_t0 - h.t0)

    def _wanted(self) -> list[tuple[_Plot, list[tuple]]]:
        """Each plot with its curves: (key, legend name, colour, width, series, symbol)."""
        loss, acc, rate, lr, load, memory = [], [], [], [], [], []
        m = self.metrics
        if m is not None:
            loss += [(rank, f"rank {rank}", colour(rank), 1, s, None) for rank, s in sorted(m.loss.items())]
            if m.global_loss.last is not None:
                loss.append(("global", "global mean", self.loss.text, 2, m.global_loss, None))
            if m.eval_loss.last is not None:
                loss.append(("eval", "validation", colour(5), 2, m.eval_loss, "o"))
            for key, name, series, c in (("top1", "top-1", m.eval_top1, 2), ("top5", "top-5", m.eval_top5, 4)):
                if series.last is not None:
                    acc.append((key, name, colour(c), 2, series, "o"))
            if m.samples_per_s.last is not None:
                rate.append(("global", "all ranks", colour(2), 2, m.samples_per_s, None))
            if m.lr.last is not None:
                lr.append(("lr", "learning rate", colour(0), 2, m.lr, None))
        h = self.history
        if h is not None and self.cpu_mode is not None:
            what = "rank" if self.cpu_mode else "GPU"
            tables = (h.cpu_pct, h.rss_mb) if self.cpu_mode else (h.gpu_util, h.gpu_mem_gb)
            for curves, table in zip((load, memory), tables):
                curves += [(key, f"{what} {key}", colour(key), 1.5, s, None) for key, s in sorted(table.items())
                           if self.cpu_mode or h.shows_gpu(key)]
        return list(zip(self.all, (loss, acc, rate, lr, load, memory)))

    def _show_optional(self) -> None:
        """Accuracy and LR only for runs that report them (the built-in recipe), so scripts keep four plots."""
        m = self.metrics
        self.hint.setVisible(m is None or (not m.loss and m.samples_per_s.last is None and m.final is None))
        shown = tuple(p for p in self.all if (p is not self.accuracy or (m is not None and m.eval_top1.last is not None))
                      and (p is not self.lr or (m is not None and m.lr.last is not None)))
        if shown == self._placed:
            return
        self._placed = shown
        for plot in self.all:
            if plot.widget.parent() is not self.body.sheet:  # never placed yet: inside, not a window of its own
                plot.widget.setParent(self.body.sheet)
            plot.widget.setVisible(plot in shown)
            self._fit(plot)
        self.body.place(tuple(p.widget for p in shown))  # no holes: the grid is rebuilt from the plots shown

    def _fit(self, plot: _Plot) -> None:
        """Keep the plot at least as big as its title, axes and legend need (the legend grows with curves)."""
        self.body.fit(plot.widget, plot.item.effectiveSizeHint(Qt.SizeHint.MinimumSize).toSize())

    def refresh(self, plots: int = 1) -> bool:
        """Redraw at most ``plots`` plots whose series changed, taking turns, so that one tick
        never repaints everything at once; returns whether anything was drawn."""
        wanted = self._wanted()
        offset = self._load_offset()
        drawn = 0
        for i in [(self._turn + k) % len(wanted) for k in range(len(wanted))]:
            plot, curves = wanted[i]
            if drawn >= plots:
                break
            x_offset = offset if plot in (self.load, self.memory) else 0.0
            if set(plot.curves) - {c[0] for c in curves}:  # a GPU no longer chosen, another run's keys
                plot.clear()
            if not any(plot.drawn.get(c[0]) != (c[4].version, plot.smoothing, x_offset) for c in curves):
                continue
            for key, name, pen_colour, width, series, symbol in curves:
                if key not in plot.curves:
                    plot.curve(key, name, pg.mkPen(pen_colour, width=width), symbol)
                    self._fit(plot)
                plot.draw(key, series, x_offset)
            if plot in (self.accuracy, self.lr) and plot not in (self._placed or ()):
                self._show_optional()
            plot.settle()
            drawn += 1
            self._turn = (i + 1) % len(wanted)
        if drawn and self.metrics is not None and self.metrics.loss and self.hint.isVisibleTo(self):
            self.hint.hide()
        return drawn > 0

    def refresh_all(self) -> None:
        self.refresh(plots=len(self.all))

    def export_data(self) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
        """What each plot shows: plot name -> curve name -> (x, y) as drawn (smoothed where smoothing is on)."""
        return {plot.name: {c.name(): c.getOriginalDataset() for c in plot.curves.values()} for plot in self.all}
