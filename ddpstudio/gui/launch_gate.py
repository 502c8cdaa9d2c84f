"""Why Launch is disabled, said where people look: its tooltip, the status bar, and on F5.

The reason names the field that blocks it ("Batch size: batch size must be at
least 1"). F5 on a disabled Launch says why instead of doing nothing (a
second F5 shortcut, active only while the Launch action is disabled, so the
two never compete), and Enter in the setup form launches.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QKeySequence, QShortcut

LAUNCH_TIP = "Start training with this setup (F5, or Enter in the form)"


class LaunchGate(QObject):
    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        action = window.launch_action
        window.launch_button.setDefault(True)  # drawn as the button Enter presses
        self.f5 = QShortcut(QKeySequence("F5"), window)
        self.f5.activated.connect(self.explain)
        for key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            enter = QShortcut(QKeySequence(key), window.form)
            enter.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            enter.activated.connect(self.launch_or_explain)
        action.changed.connect(self.refresh)
        window.check.checked.connect(self.refresh)
        window.check.pending_changed.connect(self.refresh)
        window.bench.active_changed.connect(self.refresh)
        self.shown = ""
        self.refresh()

    def reason(self) -> str | None:
        """Why Launch cannot be pressed now, in words; None when it can."""
        return self._reason()[0]

    def _reason(self) -> tuple[str | None, bool]:
        """(the reason, whether it is the setup's fault: only those go to the status bar unasked)."""
        text = self._busy()
        return (text, False) if text else self._setup()

    def _busy(self) -> str | None:
        """Launch waits for something to finish (not the setup's fault)."""
        w = self.window
        if w.controller.active:
            return "a run is in progress: stop it first (Shift+F5)"
        if w.preparing:
            return "preparing the launch…"
        if w.bench.active:
            return "a scaling benchmark is running: wait for it or stop it in the Benchmark tab"
        if w.check.machine is None:
            return "still looking at this machine (GPUs, PyTorch)…"
        if w.check.pending or w.check.latest is None:
            return "checking the setup…"
        return None

    def _setup(self) -> tuple[str | None, bool]:
        w = self.window
        problems = w.check.latest.problems
        if problems:
            first = problems[0]
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return f"{w.form.field_label(first.field)}: {first.message}{more}", True
        if not w.check.ok:
            return "the setup gives no launch plan", True
        return None, False

    def refresh(self, *_args) -> None:
        w = self.window
        enabled = w.launch_action.isEnabled()
        self.f5.setEnabled(not enabled)
        reason, setup_fault = (None, False) if enabled else self._reason()
        tip = LAUNCH_TIP if reason is None else f"Launch is unavailable: {reason}"
        w.launch_action.setToolTip(tip)
        w.launch_button.setToolTip(tip)
        shown = reason if setup_fault else ""
        if shown and shown != self.shown:
            w.statusBar().showMessage(f"Cannot launch yet: {shown}")
        elif not shown and self.shown:
            w.statusBar().clearMessage()
        self.shown = shown or ""

    def explain(self) -> None:
        """F5 while Launch is disabled: say why, in the status bar (where the eye goes after a key press)."""
        reason = self.reason()
        if reason:
            self.window.statusBar().showMessage(f"Cannot launch: {reason}", 10000)

    def launch_or_explain(self) -> None:
        if self.window.launch_action.isEnabled():
            self.window.launch()
        else:
            self.explain()
