"""Past runs from the Runs tab: show one in the plots, or put its setup back in the form ("run again").

Runs are read off the GUI thread; while a run is live its plots are not replaced.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot

from ddpstudio.gui.run_history import LoadedRun, load_run


class PastRuns(QObject):
    shown = Signal(object)  # LoadedRun, once the plots show it

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window

    def _busy(self) -> bool:
        return self.window.controller.active or self.window.preparing

    @Slot(str)
    def show(self, run_dir: str) -> None:
        self.window.workers.submit(lambda: load_run(run_dir), self._on_loaded)

    @Slot(object)
    def _on_loaded(self, run: LoadedRun) -> None:
        w = self.window
        w.runs_panel.show_details(run)
        if self._busy():
            w.statusBar().showMessage("The live run keeps the plots while it runs", 8000)
            return
        w.metrics = run.metrics
        w.run_view.show_past(run)
        w._kick_render()
        self.shown.emit(run)

    @Slot(str)
    def run_again(self, run_dir: str) -> None:
        self.window.workers.submit(lambda: load_run(run_dir), self._on_again_loaded)

    @Slot(object)
    def _on_again_loaded(self, run: LoadedRun) -> None:
        if self._busy():
            return
        w = self.window
        w.form.set_state(run.setup)
        w.form.setFocus()
        w.statusBar().showMessage(f"The form holds the setup of run {run.summary.run_id}: check it and launch",
                                  10000)
