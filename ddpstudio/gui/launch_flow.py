"""Launch, step by step: keep the setup, prepare off the GUI thread (store checks, the plan), then start or say why not."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from ddpstudio.core.hints import hints_for
from ddpstudio.gui.preflight import LaunchReady, prepare_launch
from ddpstudio.gui.run_metrics import RunMetrics


class LaunchFlow(QObject):
    blocked = Signal(object)  # Preflight: the checks said no

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.preparing = False

    def launch(self) -> None:
        w = self.window
        state = w.form.state()
        w.settings.set("setup", state.to_dict())
        w.settings.save()
        self.preparing = True
        w.statusBar().clearMessage()  # "Copied: …", "Benchmark done": about something before this launch
        w.error_panel.clear()
        w.progress.set_state("preparing")
        w._update_actions()
        machine, platform = w.check.machine, w.platform
        w.workers.submit(lambda: prepare_launch(state, machine, platform), self._on_prepared,
                         self._on_prepare_failed)

    @Slot(object)
    def _on_prepared(self, ready: LaunchReady) -> None:
        w = self.window
        self.preparing = False
        for note in ready.store_notes:
            w.log_view.append(None, "studio", note)
            w.statusBar().showMessage(note, 15000)
        if w._close_when_idle:
            w._update_actions()
            QTimer.singleShot(0, w.close)
            return
        if not ready.preflight.ok:
            problems = ready.preflight.problems
            w.form.show_problems(problems)
            text = "\n".join(p.message for p in problems)
            w.error_panel.show_failure("Launch blocked", text, hints=hints_for(text))
            w.progress.set_state("idle")
            w._update_actions()
            self.blocked.emit(ready.preflight)
            return
        w.metrics = RunMetrics()
        w.run_view.begin_run(w.metrics, ready.store_notes)
        w.advisor.begin()
        w.controller.start(ready.preflight.plan)
        w._update_actions()

    @Slot(str)
    def _on_prepare_failed(self, text: str) -> None:
        w = self.window
        self.preparing = False
        w.progress.set_state("idle")
        w.error_panel.show_failure("Could not launch", text.strip().splitlines()[-1], text.splitlines()[-15:])
        w._update_actions()
