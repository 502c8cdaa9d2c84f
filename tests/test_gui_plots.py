"""The plots people expect: smoothing against a reference EMA, hover, log scale, reset, export, time axes."""

from __future__ import annotations

import csv
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QImage

from ddpstudio.core import protocol
from ddpstudio.core.gpu import GpuSample, Snapshot
from ddpstudio.gui.dialogs import ScriptedDialogs
from ddpstudio.gui.load_history import LoadHistory
from ddpstudio.gui.plots import LivePlots
from ddpstudio.gui.run_metrics import RunMetrics
from ddpstudio.gui.smoothing import ema

pytestmark = pytest.mark.gui


def reference_ema(y: list[float], w: float) -> list[float]:
    """TensorBoard's debiased EMA written out as a weighted mean: sum (1-w) w^(n-k) y_k / (1 - w^(n+1))."""
    out = []
    for n in range(len(y)):
        weights = [(1 - w) * w ** (n - k) for k in range(n + 1)]
        out.append(sum(wk * yk for wk, yk in zip(weights, y)) / (1 - w ** (n + 1)))
    return out


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.6, 0.95])
def test_ema_matches_the_reference(weight):
    y = [2.0, 1.5, 1.9, 0.7, 1.1, 0.4, 0.6, 0.2]
    assert ema(np.array(y), weight).tolist() == pytest.approx(reference_ema(y, weight) if weight else y)


def test_ema_lets_gaps_through_without_disturbing_the_average():
    smoothed = ema(np.array([1.0, math.nan, 3.0]), 0.5)
    assert math.isnan(smoothed[1])
    assert smoothed[[0, 2]].tolist() == pytest.approx(reference_ema([1.0, 3.0], 0.5))


def fed_run(steps: int = 30) -> RunMetrics:
    m = RunMetrics()
    m.feed(protocol.make_event(protocol.RUN_STARTED, max_steps=steps))
    for s in range(1, steps + 1):
        loss = 2.0 / s + (0.3 if s % 3 == 0 else 0.0)
        for rank in (0, 1):
            m.feed(protocol.make_event(protocol.STEP, rank=rank, step=s, loss=loss + rank * 0.01))
        m.feed(protocol.make_event(protocol.GLOBAL_STEP, step=s, loss=loss, samples_per_s=100.0 + s,
                                   lr=0.1 / s))
        if s % 10 == 0:
            m.feed(protocol.make_event(protocol.EVAL, step=s, loss=loss, top1=s / 40, top5=s / 35, samples=64))
    return m


@pytest.fixture
def plots(qtbot, tmp_path):
    widget = LivePlots(dialogs=ScriptedDialogs())
    qtbot.addWidget(widget)
    widget.resize(900, 700)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def test_the_slider_smooths_loss_and_keeps_the_raw_curve_faint_behind(qtbot, plots):
    m = fed_run()
    plots.show_run(m)
    raw_y = m.global_loss.data()[1].tolist()
    plots.toolbar.smoothing.setValue(80)
    x, y = plots.loss.curves["global"].getOriginalDataset()
    assert y.tolist() == pytest.approx(reference_ema(raw_y, 0.8))
    raw = plots.loss.raw["global"]
    assert raw.isVisible() and raw.getOriginalDataset()[1].tolist() == pytest.approx(raw_y)
    assert raw.opts["pen"].color().alpha() < 100  # faint
    assert plots.loss.legend.getLabel(raw) is None  # the raw curve is not in the legend
    plots.toolbar.smoothing.setValue(0)
    assert not raw.isVisible()
    assert plots.loss.curves["global"].getOriginalDataset()[1].tolist() == pytest.approx(raw_y)
    # Accuracy is not smoothed: few points, each one a measurement.
    assert plots.accuracy.curves["top1"].getOriginalDataset()[1].tolist() == pytest.approx([25.0, 50.0, 75.0])


def test_eval_accuracy_and_lr_plots_appear_only_for_runs_that_report_them(qtbot, plots):
    plain = RunMetrics()
    plain.feed(protocol.make_event(protocol.GLOBAL_STEP, step=1, loss=1.0))
    plots.show_run(plain)
    assert not plots.accuracy.widget.isVisible() and not plots.lr.widget.isVisible()
    plots.show_run(fed_run())
    assert plots.accuracy.widget.isVisible() and plots.lr.widget.isVisible()
    assert plots.lr.curves["lr"].getOriginalDataset()[1][:3].tolist() == pytest.approx([0.1, 0.05, 0.1 / 3])
    assert set(plots.loss.curves) == {0, 1, "global", "eval"}
    assert set(plots.accuracy.curves) == {"top1", "top5"}


def test_hovering_near_a_point_reads_it_out(qtbot, plots):
    plots.toolbar.smoothing.setValue(0)
    plots.show_run(fed_run())
    plot = plots.lr
    qtbot.waitUntil(lambda: plot.item.getViewBox().viewPixelSize()[0] > 0)
    view = plot.item.getViewBox()
    target = view.mapViewToScene(QPointF(2, 0.05))
    plot.hover.on_moved(target + QPointF(3, -2))
    assert plot.hover.text == "learning rate: step 2, 0.05"
    assert plot.hover.label.isVisible()
    plot.hover.on_moved(QPointF(-50, -50))  # outside the plot
    assert not plot.hover.label.isVisible()


def test_log_scale_reset_view_grid_and_context_menu(qtbot, plots):
    plots.show_run(fed_run())
    item = plots.loss.item
    plots.toolbar.log_y.setChecked(True)
    assert item.ctrl.logYCheck.isChecked()
    view = item.getViewBox()
    view.setRange(xRange=(5, 6), yRange=(0, 0.1), padding=0)
    assert not any(view.autoRangeEnabled())
    plots.toolbar.reset.click()
    assert all(view.autoRangeEnabled())
    assert item.getAxis("left").grid and item.getAxis("bottom").grid
    assert item.menuEnabled()  # pyqtgraph's own menu, with Export…, is back on


def test_axes_start_afresh_with_each_run(qtbot, plots):
    plots.show_run(fed_run())
    view = plots.loss.item.getViewBox()
    view.setRange(xRange=(5, 6), padding=0)
    plots.show_run(RunMetrics())
    assert all(view.autoRangeEnabled()) and plots.loss.curves == {}


def test_load_plots_count_from_the_runs_start(qtbot, plots):
    history = LoadHistory()
    for t in (100.0, 101.0, 102.0, 103.0):
        gpu = GpuSample(index=0, name="GPU", utilization_pct=50, memory_used_mb=1024, memory_total_mb=8192,
                        temperature_c=None, power_w=None)
        history.add(Snapshot(t=t, mode="gpu", gpus=(gpu,)))
    plots.show_load(history, cpu_mode=False, gpu_memory_gib=8)
    plots.show_run(RunMetrics())
    plots.run_t0 = 101.5  # the run started between the second and third sample
    plots.refresh_all()
    x, _ = plots.load.curves[0].getOriginalDataset()
    assert x.tolist() == pytest.approx([0.5, 1.5])


def test_export_writes_png_svg_and_csv_that_parse(qtbot, plots, tmp_path):
    plots.toolbar.smoothing.setValue(0)
    m = fed_run()
    plots.show_run(m)
    paths = [tmp_path / "loss.png", tmp_path / "loss.svg", tmp_path / "loss.csv"]
    plots.dialogs.paths = [str(p) for p in paths]
    for _ in paths:
        assert plots.toolbar.export_one(plots.loss) is not None, plots.dialogs.asked
    image = QImage(str(paths[0]))
    assert not image.isNull() and image.width() >= 640
    assert ET.parse(paths[1]).getroot().tag.endswith("svg")
    rows = list(csv.reader(paths[2].open()))
    header = rows[0]
    column = header.index("global mean_y")
    assert [float(r[column]) for r in rows[1:]] == pytest.approx(m.global_loss.data()[1].tolist())
    plots.dialogs.paths = [str(tmp_path / "loss.txt")]
    assert plots.toolbar.export_one(plots.loss) is None
    assert plots.dialogs.asked[-1][0] == "Could not export the plot"


def test_resizing_shows_a_scaled_picture_then_lays_the_plots_out_once_it_stops(qtbot, plots):
    from ddpstudio.gui.plot_speed import NEW, OLD

    plots.show_run(fed_run())
    axes = [p.item.getAxis(a) for p in plots.all for a in ("left", "bottom")]
    curtain, body = plots.curtain, plots.body
    assert all(a.grid for a in axes) and body.isVisible() and body.size() == curtain.size()
    plots.resize(1000, 760)
    # While the edge is dragged: the plots keep their old layout, hidden behind their last picture, no grid.
    assert curtain.snapshot is not None and not body.isVisible() and body.size() != curtain.size()
    assert not any(a.grid for a in axes)
    qtbot.waitUntil(lambda: body.isVisible() and all(a.grid for a in axes), timeout=2000)
    assert curtain.snapshot is None and body.size() == curtain.size()
    plots.resize_lean.set_speed(OLD)  # the benchmark's "before": laid out live, grid kept
    plots.resize(900, 700)
    assert all(a.grid for a in axes) and body.isVisible() and body.size() == curtain.size()
    plots.resize_lean.set_speed(NEW)
