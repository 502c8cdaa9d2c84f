"""The Benchmark tab in the real window: one real CPU benchmark (1 and 2 ranks over Gloo), then its exports.

Waits on signals, never sleeps; the save dialogs are answered through
ScriptedDialogs. Only one benchmark runs here (each world size is a real run).
"""

from __future__ import annotations

import csv

import pytest
from PIL import Image
from PySide6.QtCore import Qt

from ddpstudio.gui.form_state import SetupState
from tests.test_gui_window import assert_nothing_left, mnemonics, open_window  # noqa: F401  (a fixture)

pytestmark = pytest.mark.gui
BENCH_TIMEOUT_MS = 180_000
TINY = SetupState(model="mlp", batch_size=8, image_size=8)  # the built-in perceptron: about the benchmark, not a model


def expected_scaling(rows):
    """Speedup and efficiency from the raw step times, as docs/bench.md defines them."""
    rates = {r.world_size: r.effective_batch * len(r.step_times) / sum(r.step_times) for r in rows}
    base = min(rates)
    return {ws: (rate / rates[base], rate / rates[base] / (ws / base)) for ws, rate in rates.items()}


@pytest.mark.slow
def test_a_cpu_benchmark_shows_table_chart_and_verdict_then_exports(qtbot, open_window, studio_home, tmp_path):
    csv_path, png_path = tmp_path / "out" / "bench.csv", tmp_path / "out" / "bench"  # ".png" is added
    window = open_window(TINY)
    window.dialogs.paths = [str(csv_path), str(png_path)]
    view = window.bench_view
    window.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.machine is not None, timeout=BENCH_TIMEOUT_MS)
    assert view.sizes_edit.text() == "1, 2"  # the core's default on the CPU
    assert not view.compare["backend"].isEnabled() and "NCCL" in view.compare["backend"].toolTip()
    view.sizes_edit.setText("1, 2")
    view.steps.setValue(4)
    view.warmup.setValue(1)
    qtbot.waitUntil(view.run_button.isEnabled, timeout=BENCH_TIMEOUT_MS)
    assert not view.csv_button.isEnabled()

    with qtbot.waitSignal(window.bench.active_changed, timeout=10_000):
        qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    assert not window.launch_action.isEnabled() and not view.run_button.isEnabled()  # one at a time
    assert view.stop_button.isEnabled() and not window.form.isEnabled()
    with qtbot.waitSignal(window.bench.bench_finished, timeout=BENCH_TIMEOUT_MS) as finished:
        pass
    result = finished.args[0]
    assert result is not None and not result.stopped
    assert [(r.world_size, r.state) for r in result.rows] == [(1, "ok"), (2, "ok")], [r.error for r in result.rows]
    assert view.status.text().startswith("Done")

    table = view.table
    assert table.rowCount() == 2
    wanted = expected_scaling(result.rows)
    for i, row in enumerate(result.rows):
        assert table.item(i, 0).text() == str(row.world_size)
        speedup, efficiency = wanted[row.world_size]
        shown_speedup = table.item(i, 3).data(Qt.ItemDataRole.UserRole)
        shown_efficiency = table.item(i, 4).data(Qt.ItemDataRole.UserRole)
        assert shown_speedup == pytest.approx(speedup, rel=1e-9)
        assert shown_efficiency == pytest.approx(efficiency, rel=1e-9)
        assert table.item(i, 3).text() == f"{speedup:.2f}x"
        assert table.item(i, 4).text() == f"{100 * efficiency:.0f}%"
    assert view.chart.bar_count() == 2
    x, y = view.chart.ideal.getData()
    assert list(y) == [1.0, 2.0]
    assert view.verdict.text().strip()
    assert window.launch_action.isEnabled() or window.check.pending  # the window is free again

    with qtbot.waitSignal(view.exported, timeout=30_000) as saved_csv:
        qtbot.mouseClick(view.csv_button, Qt.MouseButton.LeftButton)
    assert saved_csv.args[0] == str(csv_path)
    with open(csv_path, newline="", encoding="utf-8") as fh:
        assert [line["world_size"] for line in csv.DictReader(fh)] == ["1", "2"]
    with qtbot.waitSignal(view.exported, timeout=30_000) as saved_png:
        qtbot.mouseClick(view.png_button, Qt.MouseButton.LeftButton)
    assert saved_png.args[0] == str(png_path) + ".png"
    with Image.open(saved_png.args[0]) as image:
        assert image.format == "PNG" and image.width > 200
    assert [title for title, _ in window.dialogs.asked][-2:] == ["Export the benchmark as CSV",
                                                                 "Export the benchmark as PNG"]
    assert_nothing_left(qtbot, studio_home)


def test_invalid_world_sizes_show_the_reason_and_disable_run_and_inputs_are_kept(qtbot, open_window):
    window = open_window(TINY)
    view = window.bench_view
    window.tabs.setCurrentWidget(view)
    qtbot.waitUntil(view.run_button.isEnabled, timeout=BENCH_TIMEOUT_MS)
    keys = mnemonics(window)  # the tab's buttons beside the form's labels and the window's buttons
    assert len(keys) == len(set(keys)) and {"u", "t", "x", "g"} <= set(keys), sorted(keys)
    view.sizes_edit.clear()
    qtbot.keyClicks(view.sizes_edit, "0, x")
    assert not view.run_button.isEnabled()
    assert "whole numbers" in view.sizes_error.text() and view.sizes_error.isVisibleTo(view)
    assert "border" in view.sizes_edit.styleSheet()
    view.sizes_edit.setText("0, 2")
    assert "at least 1" in view.sizes_error.text() and not view.run_button.isEnabled()
    view.sizes_edit.setText("2, 1")
    assert view.run_button.isEnabled() and not view.sizes_error.isVisibleTo(view)
    assert view.sizes == [1, 2]

    view.steps.setValue(7)  # the tab's inputs come back with the window
    window.close()
    again = open_window().bench_view
    qtbot.waitUntil(lambda: again.machine is not None, timeout=BENCH_TIMEOUT_MS)
    assert again.sizes_edit.text() == "2, 1" and again.steps.value() == 7
