"""Issue 25 §3 in the window: a stuck rank is said above the plots with a Stop button, and Stop ends the run.

A real run of tests/scripts/hang_in_step.py (2 Gloo ranks; rank 1 sleeps for ever in step 5) with the form's
"Stuck rank after" at 5 s.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from ddpstudio.core import protocol
from ddpstudio.gui.form_state import SetupState
from tests.studio import SCRIPTS
from tests.test_gui_window import RUN_TIMEOUT_MS, assert_nothing_left, launch, open_window  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


def test_a_stuck_rank_is_shown_with_stop_and_stop_ends_the_run(qtbot, open_window, studio_home):  # noqa: F811
    window = open_window(SetupState(workload="script-env", script_path=str(SCRIPTS / "hang_in_step.py"),
                                    script_args="sleep 5", hang_timeout=5))
    with qtbot.waitSignal(window.controller.rank_stuck, timeout=RUN_TIMEOUT_MS) as stuck:
        launch(qtbot, window)
    assert (stuck.args[0].rank, stuck.args[0].get("phase")) == (1, "script")
    panel = window.error_panel
    qtbot.waitUntil(panel.isVisible)
    assert panel.kind == "stuck" and panel.stop_button.isVisible()
    assert panel.summary.text().startswith("rank 1 stuck in the script's own code at step 5: no progress for ")
    qtbot.waitUntil(lambda: "stuck: rank 1 stuck in the script's own code at step 5" in window.log_view.shown_text())
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        qtbot.mouseClick(panel.stop_button, Qt.MouseButton.LeftButton)
    assert finished.args[0].get("state") == protocol.STOPPED
    assert not panel.isVisible()
    assert_nothing_left(qtbot, studio_home)
