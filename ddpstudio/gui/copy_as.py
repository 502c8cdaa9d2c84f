"""Run ▸ Copy as ▸ torchrun / SLURM script / SkyPilot task / Kubeflow TrainJob, from the setup form or a past run.

The form goes through ``ddpstudio export-job``'s own planning as ``run``
options (the "Copy as command" arguments, gui/command_line.py), and a past
run through its plan file, on a worker; the plan then opens in the
``JobDialog``. So the window copies what the command line prints for the same
settings. A setup that cannot be planned is said in the status bar.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from ddpstudio.core.jobs.engines import ENGINES, TITLES
from ddpstudio.core.jobs.job import JobError
from ddpstudio.gui.command_line import run_arguments
from ddpstudio.gui.job_dialog import JobDialog


def planned(source: list[str], platform):
    """(plan, where it came from, workers) for ``export-job``'s source words, or the JobError saying why not."""
    from ddpstudio.cli.exportjob import source_plan

    try:
        return source_plan(source, platform)
    except JobError as exc:
        return exc
    except SystemExit:  # argparse refused the options (only a form the CLI cannot express gets here)
        return JobError(f"the setup is not valid 'ddpstudio run' options: {' '.join(source[1:])}")


class CopyAs(QObject):
    dialog_opened = Signal(object)  # the JobDialog, once its plan is ready
    refused = Signal(str)  # why no job could be written

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = w = window
        self.dialog: JobDialog | None = None
        self.menu = w.actions.run_menu.addMenu("Copy &as")
        self.menu.setToolTipsVisible(True)
        for engine in ENGINES:
            action = self.menu.addAction(f"{TITLES[engine]}…", lambda engine=engine: self.from_form(engine))
            action.setToolTip(f"The setup on the left as a {TITLES[engine]} for a Linux cluster "
                              "(the same as 'ddpstudio export-job')")
        w.runs_panel.copy_as_requested.connect(self.from_run)

    @Slot(str)
    def from_form(self, engine: str) -> None:
        w = self.window
        try:
            source = ["run", *run_arguments(w.form.state(), w.platform)]
        except ValueError as exc:
            self._refuse(engine, str(exc))
            return
        self._plan(engine, source, "the setup")

    @Slot(str, str)
    def from_run(self, run_dir: str, engine: str) -> None:
        self._plan(engine, [run_dir], f"run {Path(run_dir).name}")

    def _plan(self, engine: str, source: list[str], what: str) -> None:
        platform = self.window.platform
        self.window.statusBar().showMessage(f"Writing the {TITLES[engine]}…", 5000)
        self.window.workers.submit(lambda: (engine, what, planned(source, platform)), self._on_planned,
                                   lambda text: self._refuse(engine, text.strip().splitlines()[-1]))

    @Slot(object)
    def _on_planned(self, result) -> None:
        engine, what, found = result
        if isinstance(found, JobError):
            self._refuse(engine, str(found))
            return
        w = self.window
        if self.dialog is not None:
            self.dialog.close()
        plan, where, workers = found
        self.dialog = dialog = JobDialog(plan, where, workers, engine, w.dialogs, what, w)
        dialog.copied.connect(lambda name, _text: w.statusBar().showMessage(
            f"Copied the {TITLES[name]} to the clipboard", 10000))
        dialog.saved.connect(lambda name, path: w.statusBar().showMessage(f"{TITLES[name]} saved to {path}", 10000))
        dialog.open()
        self.dialog_opened.emit(dialog)

    def _refuse(self, engine: str, why: str) -> None:
        message = f"Cannot write the {TITLES[engine]}: {why.replace(chr(10), '; ')}"
        self.window.statusBar().showMessage(message, 15000)
        self.refused.emit(message)
