"""The window's DataLoader workers field: "auto" by default, and the machine panel says how many and why."""

from __future__ import annotations

import pytest

from ddpstudio.core.dataworkers import choose_workers, usable_cores
from ddpstudio.gui.command_line import run_arguments
from ddpstudio.gui.form_state import SetupState
from tests.test_gui_window import RUN_TIMEOUT_MS, open_window  # noqa: F401 (a fixture)
from tests.test_recipe_speed import _image_folder

pytestmark = pytest.mark.gui


def test_workers_are_auto_and_the_decision_shows_with_the_others(qtbot, open_window, tmp_path):  # noqa: F811
    data = _image_folder(tmp_path / "images")
    window = open_window(SetupState(batch_size=4, image_size=16, max_steps=3, data="folder", data_dir=str(data)))
    spin = window.form.editors["workers"]
    assert spin.text() == "auto (for this machine)"
    assert window.form.state().to_request().recipe.workers is None
    assert "--workers" not in run_arguments(window.form.state())
    auto = choose_workers(None, usable_cores(), 2, window.platform, "folder").reason
    qtbot.waitUntil(lambda: auto in window.machine_panel.decisions.text(), timeout=RUN_TIMEOUT_MS)
    spin.setValue(2)
    qtbot.waitUntil(lambda: "DataLoader workers: 2 per rank, chosen by you" in window.machine_panel.decisions.text(),
                    timeout=RUN_TIMEOUT_MS)
    args = run_arguments(window.form.state())
    assert args[args.index("--workers") + 1] == "2"
