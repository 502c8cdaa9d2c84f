"""Validation as the user types: the form's state is checked on a worker, a moment after the last key.

Each request gets a generation number; a result that arrives after a newer
edit is dropped, so the form never shows a stale verdict. ``checked`` carries
the Preflight (problems, or the plan with the reasons for each choice).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from ddpstudio.core.platform import Platform
from ddpstudio.core.validate import Problem
from ddpstudio.gui.form_state import SetupState
from ddpstudio.gui.preflight import Preflight, preflight
from ddpstudio.gui.workers import Workers

DEBOUNCE_MS = 250


class SetupCheck(QObject):
    checked = Signal(object)  # Preflight, for the newest state only
    pending_changed = Signal(bool)  # True while the newest state has not been checked

    def __init__(self, workers: Workers, platform: Platform, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.workers, self.platform = workers, platform
        self.machine = None  # the Inventory, once known: nothing is judged before
        self.latest: Preflight | None = None
        self._state: SetupState | None = None
        self._generation = 0
        self._pending = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._run)

    @property
    def pending(self) -> bool:
        return self._pending

    @property
    def ok(self) -> bool:
        return not self._pending and self.latest is not None and self.latest.ok

    def request(self, state: SetupState, at_once: bool = False) -> None:
        self._state = state
        self._generation += 1
        self._set_pending(True)
        if at_once:
            self._timer.stop()
            self._run()
        else:
            self._timer.start()

    def warm_up(self) -> None:
        """Import torchvision (the model list) now, beside the inventory's torch import, not after it."""
        from ddpstudio.core.validate import classification_models

        self.workers.submit(classification_models, self._ignore, self._ignore)

    @Slot(object)
    def _ignore(self, _result) -> None:
        pass

    def set_machine(self, machine) -> None:
        self.machine = machine
        if self._state is not None:
            self.request(self._state, at_once=True)

    @Slot()
    def _run(self) -> None:
        if self.machine is None or self._state is None:
            return  # set_machine() asks again
        state, machine, platform, generation = self._state, self.machine, self.platform, self._generation
        self.workers.submit(lambda: (generation, preflight(state, machine, platform)), self._on_checked,
                            self._on_failed)

    @Slot(object)
    def _on_checked(self, result: tuple[int, Preflight]) -> None:
        generation, checked = result
        if generation != self._generation:
            return
        self.latest = checked
        self._set_pending(False)
        self.checked.emit(checked)

    @Slot(str)
    def _on_failed(self, text: str) -> None:
        """A check that crashed (a broken torchvision, say) must still say why Launch is off."""
        reason = text.strip().splitlines()[-1] if text.strip() else "unknown error"
        self.latest = Preflight((Problem("workload", f"could not check this setup: {reason}"),))
        self._set_pending(False)
        self.checked.emit(self.latest)

    def _set_pending(self, pending: bool) -> None:
        if pending != self._pending:
            self._pending = pending
            self.pending_changed.emit(pending)
