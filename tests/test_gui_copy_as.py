"""Run ▸ Copy as ▸ torchrun / SLURM script / SkyPilot task / Kubeflow TrainJob in the real window: from the setup
form and from a past run, the text copied (or saved) is what 'ddpstudio export-job' prints for the same settings
(issue 26). pytest-qt, waiting on signals."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from ddpstudio.core.jobs.engines import ENGINES, TITLES
from ddpstudio.core.plan import RecipeSpec
from ddpstudio.gui.form_state import SetupState
from tests.test_export_job import _windows_run
from tests.test_gui_window import RUN_TIMEOUT_MS, open_window  # noqa: F401

pytestmark = pytest.mark.gui

# The same setup twice: as the form holds it, and as 'ddpstudio run' options typed by hand.
FORM = SetupState(model="mlp", max_steps=6, batch_size=8, image_size=8, lr=0.1, world_size=2)
RUN_OPTIONS = ["run", "--model", "mlp", "--max-steps", "6", "--batch-size", "8", "--image-size", "8", "--lr",
               "0.1", "--world-size", "2"]
# Each engine's own field in the dialog and its export-job flag.
OWN_FIELD = {"torchrun": ("host", "10.0.0.1", "--host"), "skypilot": ("accelerator", "H100", "--accelerator"),
             "k8s": ("image", "registry.example/ddp:1", "--image")}


def export_job(*args: str) -> str:
    """What 'ddpstudio export-job ARGS' prints, run as a user runs it."""
    done = subprocess.run([sys.executable, "-m", "ddpstudio", "export-job", *args], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout


RUN_ID = re.compile(r"\b[0-9]{8}-[0-9]{6}-[0-9a-f]{6}\b")


def assert_same_job(copied: str, printed: str) -> None:
    """Equal texts, but for the id each export gives the cluster's run (a new one every time); the id of the
    run it came from, if any, is in both."""
    (ours,) = set(RUN_ID.findall(copied)) - set(RUN_ID.findall(printed))
    (theirs,) = set(RUN_ID.findall(printed)) - set(RUN_ID.findall(copied))
    assert copied.replace(ours, theirs) == printed


def copy_as_menu(window):
    (run_menu,) = [a.menu() for a in window.menuBar().actions() if a.text() == "&Run"]
    (menu,) = [a.menu() for a in run_menu.actions() if a.menu() is not None and a.text() == "Copy &as"]
    return menu


def open_dialog(qtbot, window, action):
    with qtbot.waitSignal(window.copy_as.dialog_opened, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda d: d.isVisible()) as opened:
        action.trigger()
    return opened.args[0]


def test_copy_as_from_the_form_is_what_export_job_prints_for_each_engine(qtbot, open_window):
    window = open_window(FORM)
    actions = copy_as_menu(window).actions()
    assert [a.text() for a in actions] == ["torchrun…", "SLURM script…", "SkyPilot task…", "Kubeflow TrainJob…"]
    for engine, action in zip(ENGINES, actions):
        dialog = open_dialog(qtbot, window, action)
        assert dialog.engine_name == engine
        dialog.nodes.setValue(2)
        dialog.procs.setValue(4)
        dialog.device.setCurrentIndex(dialog.device.findData("cuda"))
        dialog.port.setValue(29512)
        dialog.restarts.setValue(1)
        flags = ["--to", engine, "--nodes", "2", "--gpus-per-node", "4", "--device", "cuda", "--port", "29512",
                 "--max-restarts", "1"]
        if engine in OWN_FIELD:
            name, value, flag = OWN_FIELD[engine]
            editor = getattr(dialog, name)
            assert editor.isVisible()
            editor.clear()
            qtbot.keyClicks(editor, value)
            flags += [flag, value]
        with qtbot.waitSignal(dialog.copied, timeout=5_000):
            qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
        copied = QGuiApplication.clipboard().text()
        assert copied == dialog.preview.toPlainText()
        assert window.statusBar().currentMessage() == f"Copied the {TITLES[engine]} to the clipboard"
        assert_same_job(copied, export_job(*flags, *RUN_OPTIONS))


def test_copy_as_from_a_past_run_saves_what_export_job_writes(qtbot, open_window, studio_home, tmp_path):
    past = _windows_run(studio_home, recipe=RecipeSpec(model="mlp"), max_restarts=2)
    window = open_window()
    target = tmp_path / "job.sbatch"
    window.dialogs.paths = [str(target)]
    menu = window.runs_panel.context_menu(past.run_dir)
    (copy_as,) = [a.menu() for a in menu.actions() if a.text() == "Copy as"]
    (slurm,) = [a for a in copy_as.actions() if a.text() == "SLURM script…"]
    dialog = open_dialog(qtbot, window, slurm)
    assert dialog.engine_name == "slurm" and not dialog.host.isVisible()
    assert dialog.procs.text() == f"as the run ({past.ranks_per_node})"
    dialog.nodes.setValue(3)
    with qtbot.waitSignal(dialog.saved, timeout=5_000):
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert window.dialogs.asked[-1][0] == "Save the SLURM script"
    saved = target.read_text(encoding="utf-8")
    assert f"exported from run {past.run_id}" in saved and "--max-restarts 2" in saved
    assert subprocess.run(["bash", "-n", str(target)]).returncode == 0
    assert_same_job(saved, export_job("--to", "slurm", "--nodes", "3", past.run_id))


def test_a_setup_that_cannot_be_planned_is_said_and_opens_nothing(qtbot, open_window):
    window = open_window(SetupState(model="no_such_model"))
    (slurm,) = [a for a in copy_as_menu(window).actions() if a.text() == "SLURM script…"]
    with qtbot.waitSignal(window.copy_as.refused, timeout=RUN_TIMEOUT_MS) as refused:
        slurm.trigger()
    assert refused.args[0].startswith("Cannot write the SLURM script: ") and "no_such_model" in refused.args[0]
    assert window.statusBar().currentMessage() == refused.args[0]
    assert window.copy_as.dialog is None
