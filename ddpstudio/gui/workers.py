"""Blocking calls off the GUI thread: torch import, validation, psutil scans, file reads.

``Workers.submit(fn, on_done, on_failed)`` runs ``fn()`` on a small thread
pool; the result comes back as a signal, so ``on_done`` runs on the GUI
thread. Pass bound methods of QObjects (they are what makes the call queued).
"""

from __future__ import annotations

import logging
import traceback
from typing import Any, Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

log = logging.getLogger(__name__)


class _Relay(QObject):
    succeeded = Signal(object)
    failed = Signal(str)


class _Job(QRunnable):
    def __init__(self, fn: Callable[[], Any], relay: _Relay) -> None:
        super().__init__()
        self.fn, self.relay = fn, relay

    def run(self) -> None:
        try:
            result = self.fn()
        except Exception:
            self._deliver(self.relay.failed, traceback.format_exc())
        else:
            self._deliver(self.relay.succeeded, result)

    @staticmethod
    def _deliver(signal, value) -> None:
        try:
            signal.emit(value)
        except RuntimeError:  # the window closed while the job ran: nobody is left to tell
            log.debug("a background job finished after its window was closed")


class Workers(QObject):
    job_finished = Signal()

    def __init__(self, parent: QObject | None = None, threads: int = 2) -> None:
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(threads)
        self._relays: set[_Relay] = set()

    @property
    def busy(self) -> bool:
        return bool(self._relays)

    def submit(self, fn: Callable[[], Any], on_done: Callable[[Any], None],
               on_failed: Callable[[str], None] | None = None) -> None:
        relay = _Relay()  # lives on the GUI thread, so its signals reach slots there
        relay.succeeded.connect(on_done)
        relay.failed.connect(on_failed or self._log_failure)
        relay.succeeded.connect(self._forget)
        relay.failed.connect(self._forget)
        self._relays.add(relay)
        self.pool.start(_Job(fn, relay))

    @Slot()
    def _forget(self, *_args) -> None:
        relay = self.sender()
        self._relays.discard(relay)
        self.job_finished.emit()

    @Slot(str)
    def _log_failure(self, text: str) -> None:
        log.error("background job failed:\n%s", text)
