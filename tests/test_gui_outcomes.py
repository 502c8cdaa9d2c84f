"""Issue 11 §2 in the window: a script that exits 0 without a process group is "not a distributed script"."""

from __future__ import annotations

import pytest

from ddpstudio.core import protocol
from ddpstudio.gui.form_state import SetupState
from ddpstudio.gui.run_history import load_run
from tests.studio import SCRIPTS
from tests.test_gui_window import RUN_TIMEOUT_MS, assert_nothing_left, launch, open_window  # noqa: F401

pytestmark = pytest.mark.gui
SHORTAGE = "Unable to locate sufficient 2 gpus to run this example. Exiting."


@pytest.mark.slow
def test_not_a_distributed_script_shows_the_panel_with_the_ranks_last_lines(qtbot, open_window, studio_home):  # noqa: F811
    window = open_window(SetupState(workload="script-env", script_path=str(SCRIPTS / "gpu_shortage.py")))
    launch(qtbot, window)
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        pass
    assert finished.args[0].get("state") == protocol.NOT_DISTRIBUTED
    assert window.controller.state_name == "not_distributed"
    panel = window.error_panel
    assert panel.isVisible() and panel.kind == "failure"
    assert panel.title.text() == "Not a distributed script"
    assert panel.summary.text().startswith("not a distributed script: the ranks imported torch but none called")
    assert panel.details_button.text() == "Last output" and panel.details.isVisible()
    assert panel.details.toPlainText().splitlines() == [f"[rank 0] {SHORTAGE}", f"[rank 1] {SHORTAGE}"]
    assert window.progress.state.text() == "Not a distributed script"
    assert window.statusBar().currentMessage().startswith("Run not a distributed script after ")
    assert_nothing_left(qtbot, studio_home)

    panel.clear()  # reopened from its folder, the run says the same
    window.run_view.show_past(load_run(finished.args[0].get("run_dir")))
    assert panel.isVisible() and panel.title.text() == "Not a distributed script"
    assert panel.details.toPlainText().splitlines()[-1] == f"[rank 1] {SHORTAGE}"
    assert "not a distributed script): the plots show" in window.run_view.past_banner.text()
