"""The summary card's "Compare with…" on a real finished run: the Compare tab opens with the previous run of
the same model as the baseline and this run, both selected in the Runs tab (where Ctrl-click picks more)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from PySide6.QtCore import Qt

from ddpstudio.core import protocol
from ddpstudio.core.metrics.catalog import list_entries, previous_of
from tests.test_gui_window import DEMO, RUN_TIMEOUT_MS, assert_nothing_left, launch, open_window  # noqa: F401

pytestmark = [pytest.mark.gui, pytest.mark.slow]


def cli_demo_run(world_size: int) -> str:
    """A finished demo run through the real CLI (the home is the test's); returns its folder."""
    done = subprocess.run([sys.executable, "-m", "ddpstudio", "run", "--demo", "--json", "--world-size",
                           str(world_size), "--model", "mlp", "--batch-size", "8", "--max-steps", "2",
                           "--image-size", "8"],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_MS / 1000, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-2000:]
    parser = protocol.EventParser()
    return next(e.get("run_dir") for line in done.stdout.splitlines() for e in parser.feed(line)
                if e.type == protocol.RUN_STARTED)


def test_compare_with_opens_this_run_against_the_previous_one_of_the_same_model(qtbot, open_window, studio_home):
    previous = cli_demo_run(world_size=1)
    window = open_window(DEMO)
    launch(qtbot, window)
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        pass
    assert finished.args[0].get("state") == "finished"
    this = finished.args[0].get("run_dir")
    progress = window.run_view.progress
    qtbot.waitUntil(progress.compare_button.isVisible, timeout=10_000)
    assert progress.card.isVisible() and progress.ended_dir == this

    with qtbot.waitSignal(window.run_view.compare_view.compared, timeout=30_000) as compared:
        qtbot.mouseClick(progress.compare_button, Qt.MouseButton.LeftButton)
    view = window.run_view.compare_view
    assert compared.args == [2]
    assert view.run_dirs == [previous, this]  # the previous run is the baseline of the speedups
    assert [r.entry.run_dir for r in view.runs] == [previous, this]
    assert [r.entry.world_size for r in view.runs] == [1, 2]
    assert window.run_view.tabs.currentWidget() is view
    assert set(window.runs_panel.selected_dirs()) == {previous, this}
    assert progress.compare_button.toolTip().startswith("Open the Compare tab")

    # The baseline is the newest earlier run of the same model; none for the first run.
    entries = list_entries()
    assert previous_of(entries, this).run_dir == previous
    assert previous_of(entries, previous) is None
    assert_nothing_left(qtbot, studio_home)
