"""The window's Python field (core/userpython.py, tests/test_user_python.py): judged as it is typed, and the
chosen Python named among the plan's decisions."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from ddpstudio.gui.form_state import SetupState
from tests.studio import SCRIPTS
from tests.test_gui_window import RUN_TIMEOUT_MS, open_window  # noqa: F401
from tests.test_user_python import envs  # noqa: F401  (the module-scoped environments)

pytestmark = pytest.mark.gui


def test_the_window_judges_the_python_field_and_names_the_chosen_python_in_the_plan(qtbot, open_window, envs,
                                                                                     tmp_path):
    window = open_window(SetupState(workload="script-env", script_path=str(SCRIPTS / "which_python.py")))
    form = window.form
    qtbot.keyClicks(form.editors["script_python"].edit, str(tmp_path / "nope" / "python"))
    qtbot.waitUntil(lambda: "there is no" in form.problem_text("python"), timeout=RUN_TIMEOUT_MS)
    assert not window.launch_button.isEnabled()
    assert "border" in form.editors["script_python"].edit.styleSheet()  # the field is marked red
    form.editors["script_python"].setText(str(envs["bare"]))
    qtbot.waitUntil(lambda: "cannot import torch" in form.problem_text("python"), timeout=RUN_TIMEOUT_MS)
    problem = form.errors["script_python"]  # a long problem, paths in it: all of it shows, wrapped at the field
    qtbot.waitUntil(lambda: problem.height() >= problem.heightForWidth(problem.width()) > 3 * problem.fontMetrics()
                    .height(), timeout=5_000)
    form.editors["script_python"].setText(str(envs["torch"]))
    qtbot.waitUntil(lambda: f"your script runs in {envs['torch'].absolute()}" in
                    window.machine_panel.decisions.text(), timeout=RUN_TIMEOUT_MS)
    assert form.problem_text("python") == ""
    qtbot.waitUntil(window.launch_button.isEnabled, timeout=RUN_TIMEOUT_MS)
    form.editors["workload"].setCurrentIndex(form.editors["workload"].findData("recipe"))
    assert not form.editors["script_python"].isVisibleTo(form)  # the recipe runs in DDP Studio's own Python


def test_browse_for_the_python_lists_interpreters_not_scripts(qtbot, open_window, envs):
    window = open_window(SetupState(workload="script-env", script_path=str(SCRIPTS / "which_python.py")))
    dialogs = window.form.editors["script_python"].dialogs
    dialogs.paths.append(str(envs["torch"]))
    qtbot.mouseClick(window.form.editors["script_python"].browse, Qt.MouseButton.LeftButton)
    assert window.form.editors["script_python"].text() == str(envs["torch"])
    assert dialogs.filters[-1].startswith("Python (python") and "*.py)" not in dialogs.filters[-1]
    dialogs.paths.append(str(SCRIPTS / "which_python.py"))
    qtbot.mouseClick(window.form.editors["script_path"].browse, Qt.MouseButton.LeftButton)
    assert len(dialogs.filters) == 1  # the script's Browse keeps the dialog's own default: Python scripts
