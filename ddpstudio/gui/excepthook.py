"""The global exception hook: every uncaught exception goes to a log file; one dialog at most.

Exceptions in Qt slots, in worker threads and at the top level all end here.
The first one shows a dialog (on the GUI thread, through the dialogs seam)
naming the log file; later ones are only logged, so a failing timer cannot
bury the user in dialogs.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading
import traceback
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from ddpstudio.core import paths

LOG_NAME = "ddpstudio-gui.log"
log = logging.getLogger("ddpstudio.gui.crash")


class ExceptionHook(QObject):
    exception_caught = Signal(str)  # the formatted traceback, delivered on the GUI thread

    def __init__(self, dialogs, log_path: Path | None = None) -> None:
        super().__init__()
        self.dialogs = dialogs
        self.log_path = log_path or paths.log_dir() / LOG_NAME
        self.shown = False
        self.count = 0
        self._previous = (sys.excepthook, threading.excepthook)
        self._handler: logging.Handler | None = None
        self.exception_caught.connect(self._show)

    def install(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._handler = logging.handlers.RotatingFileHandler(self.log_path, maxBytes=1_000_000, backupCount=3,
                                                             encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(self._handler)
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
        sys.excepthook = self.handle
        threading.excepthook = lambda args: self.handle(args.exc_type, args.exc_value, args.exc_traceback)

    def uninstall(self) -> None:
        sys.excepthook, threading.excepthook = self._previous
        if self._handler is not None:
            logging.getLogger().removeHandler(self._handler)
            self._handler.close()
            self._handler = None

    def handle(self, exc_type, exc_value, tb) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc_value, tb)
            return
        text = "".join(traceback.format_exception(exc_type, exc_value, tb))
        self.count += 1
        log.error("uncaught exception:\n%s", text)
        self.exception_caught.emit(text)  # queued when raised off the GUI thread

    @Slot(str)
    def _show(self, text: str) -> None:
        if self.shown:
            return
        self.shown = True
        last = text.strip().splitlines()[-1] if text.strip() else "unknown error"
        self.dialogs.error("DDP Studio: unexpected error",
                           f"Something went wrong inside DDP Studio: {last}\n\nThe details were written to "
                           f"{self.log_path}. Further errors are only logged there.", text)
