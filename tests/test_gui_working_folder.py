"""The window runs a script in the script's folder when Working folder is left empty, as the field says.

Before, an empty field kept the launcher's folder, which is the window's own: started from the Start menu,
the install folder (the shortcut's "Start in", installer/ddpstudio.nsi). A script's ``open("snapshot.pt",
"w")`` wrote there, and its relative data paths did not resolve. A module of a package (tests/
test_package_scripts.py) runs from the folder above its package, where ``python -m`` is run.
"""

from __future__ import annotations

import shlex

import pytest

from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.gui.command_line import command_line
from ddpstudio.gui.form_state import SetupState, from_plan
from tests.test_gui_window import RUN_TIMEOUT_MS, assert_nothing_left, launch, open_window  # noqa: F401
from tests.test_package_scripts import entry, package

pytestmark = pytest.mark.gui


def test_an_empty_working_folder_is_the_scripts_folder_or_the_folder_above_its_package(tmp_path):
    plain = tmp_path / "scripts" / "train.py"
    plain.parent.mkdir()
    plain.write_text("print('hi')\n")
    state = SetupState(workload="script-env", script_path=str(plain))
    assert state.working_folder() == str(tmp_path / "scripts")
    assert state.to_request(LINUX).script.cwd == str(tmp_path / "scripts")
    module = package(tmp_path / "proj", "mypkg")
    assert SetupState(workload="script-env", script_path=str(module)).working_folder() == str(tmp_path / "proj")
    typed = SetupState(workload="script-env", script_path=str(plain), script_cwd=f"  {tmp_path}  ")
    assert typed.to_request(LINUX).script.cwd == str(tmp_path)  # a typed folder wins
    # No script file yet (nothing typed, or a path that names none): nothing to take it from.
    assert SetupState(workload="script-env").to_request(LINUX).script.cwd is None
    assert SetupState(workload="script-env", script_path=r"C:\nowhere\t.py").working_folder() is None


def test_copy_as_says_the_folder_and_a_run_again_shows_the_default_as_empty(tmp_path):
    plain = tmp_path / "my scripts" / "train.py"
    plain.parent.mkdir()
    plain.write_text("print('hi')\n")
    state = SetupState(workload="script-args", script_path=str(plain))
    assert command_line(state, LINUX) == f"cd {shlex.quote(str(plain.parent))} && ddpstudio run --script " \
        f"{shlex.quote(str(plain))}"
    assert command_line(SetupState(workload="script-args", script_path=r"C:\x\t.py"), WINDOWS) == \
        r"ddpstudio run --script C:\x\t.py"  # no such file here: no folder to say

    from ddpstudio.core.plan import Plan, ScriptSpec

    def loaded(cwd):
        plan = Plan(run_id="r", run_dir="/r", world_size=2, backend="gloo", device="cpu", store="file",
                    init_method="file:///s", script=ScriptSpec(path=str(plain), cwd=cwd))
        return from_plan(plan, LINUX).script_cwd

    assert loaded(str(plain.parent)) == ""  # the default: it follows the script when the script changes
    assert loaded(str(tmp_path)) == str(tmp_path)  # chosen: kept
    assert loaded(None) == ""


def test_the_working_folder_field_names_the_folder_an_empty_field_means(qtbot, open_window, tmp_path):
    plain = tmp_path / "scripts" / "train.py"
    plain.parent.mkdir()
    plain.write_text("print('hi')\n")
    module = package(tmp_path / "proj", "mypkg")
    window = open_window(SetupState(workload="script-args"))
    path, cwd = window.form.editors["script_path"], window.form.editors["script_cwd"].edit
    assert cwd.placeholderText() == "the script's folder if empty"
    path.setText(str(plain))
    assert cwd.placeholderText() == str(tmp_path / "scripts")
    assert cwd.toolTip().endswith(f"Empty, this script runs in {tmp_path / 'scripts'}: its own folder.")
    path.setText(str(module))
    assert cwd.placeholderText() == str(tmp_path / "proj")
    assert cwd.toolTip().endswith(f"Empty, this script runs in {tmp_path / 'proj'}: the folder above its package, "
                                  "which it runs from as a module.")
    path.setText("")
    assert cwd.placeholderText() == "the script's folder if empty"
    window.form.set_state(SetupState(workload="script-env", script_path=str(module)))  # a saved setup, reopened
    assert cwd.placeholderText() == str(tmp_path / "proj")


@pytest.mark.slow
def test_the_window_runs_a_package_script_as_a_module_from_the_folder_above_its_package(
        qtbot, open_window, studio_home, tmp_path, monkeypatch):
    script = package(tmp_path / "proj", "mypkg")
    (tmp_path / "installed").mkdir()
    monkeypatch.chdir(tmp_path / "installed")  # the window's own folder, as the Start-menu shortcut gives it
    window = open_window(SetupState(workload="script-args"))
    window.form.editors["script_path"].setText(str(script))
    assert window.form.state().workload == "script-env"  # it joins by env:// (the torchrun kind)
    qtbot.waitUntil(lambda: entry(script).why in window.machine_panel.decisions.text(), timeout=RUN_TIMEOUT_MS)
    launch(qtbot, window)
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        pass
    assert finished.args[0].get("state") == "finished", window.log_view.shown_text()[-3000:]
    assert "rank 0 step 5 loss" in window.log_view.shown_text()
    assert (tmp_path / "proj" / "trained.txt").read_text() == str(script)
    assert list((tmp_path / "installed").iterdir()) == []
    assert_nothing_left(qtbot, studio_home)
