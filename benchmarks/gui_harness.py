"""What the window benchmarks share: the real MainWindow fed by gui_event_source.py, and percentiles.

Used by benchmarks/gui_ingest.py and benchmarks/gui_resize.py. The window is
the production one (QProcess, EventParser, RunMetrics, the render timer, the
plots); only the launcher command is replaced by the event source, which speaks
the launcher's protocol at a fixed rate.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile by nearest rank (NaN for no values)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def open_window(home_prefix: str, size: tuple[int, int]):
    """A QApplication and a shown MainWindow with a fresh DDPSTUDIO_HOME; returns (app, window)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["DDPSTUDIO_HOME"] = tempfile.mkdtemp(prefix=home_prefix)
    from PySide6.QtWidgets import QApplication

    from ddpstudio.gui.dialogs import ScriptedDialogs
    from ddpstudio.gui.form_state import SetupState
    from ddpstudio.gui.mainwindow import MainWindow

    app = QApplication(sys.argv[:1])
    window = MainWindow(dialogs=ScriptedDialogs(yes=True))
    window.form.set_state(SetupState(batch_size=8))
    window.resize(*size)
    window.show()
    return app, window


def feed_from_event_source(window, rate: float, seconds: float) -> None:
    """The window's next launch runs gui_event_source.py instead of the launcher."""
    source = [sys.executable, str(HERE / "gui_event_source.py"), "--rate", str(rate), "--seconds", str(seconds)]
    start = window.controller.start
    window.controller.start = lambda plan: start(plan, command=source + ["--run-dir", plan.run_dir])


def when_launch_enabled(window, then) -> object:
    """Calls ``then()`` once the window's Launch is enabled (the machine check done); keep the timer."""
    from PySide6.QtCore import QTimer

    waiting = QTimer()

    def check() -> None:
        if window.launch_action.isEnabled():
            waiting.stop()
            then()

    waiting.timeout.connect(check)
    waiting.start(100)
    return waiting
