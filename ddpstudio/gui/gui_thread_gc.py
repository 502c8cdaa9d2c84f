"""Python's cycle collector runs on the GUI thread only, on a timer, never inside a worker thread.

Why: the collector runs in whichever thread happens to allocate past its
threshold. When it frees a Qt object that was part of a reference cycle (a
closed window, a menu, a dialog whose slots point back at it) from a worker
thread, ``QObject::~QObject`` takes the object's signal lock there and then
asks for the GIL, while the GUI thread holds the GIL and waits for that same
lock: both stop for good. Seen on this project: a worker building resnet18
for the setup check collected an old window's QMenu (py-spy: the worker in
``gc_collect_main`` -> ``QObject::~QObject`` -> ``Shiboken::GilState::acquire``,
the GUI thread in ``QAction::~QAction`` -> ``QBasicMutex::lockInternal``).

So automatic collection is switched off and the GUI thread collects instead,
generation by generation, when the allocation counts pass the thresholds the
automatic collector would have used (so the cost is the same as before).
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QCoreApplication, QObject, QTimer

INTERVAL_MS = 500


class GuiThreadCollector(QObject):
    def __init__(self, parent: QObject) -> None:
        super().__init__(parent)
        self.thresholds = gc.get_threshold()
        gc.disable()
        self.timer = QTimer(self)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self.collect_due)
        self.timer.start()
        parent.destroyed.connect(gc.enable)

    def collect_due(self) -> int | None:
        """Collect the oldest generation whose count passed its threshold; return it (None: nothing due)."""
        counts = gc.get_count()
        due = None
        for generation in range(3):
            if counts[generation] > self.thresholds[generation]:
                due = generation
        if due is not None:
            gc.collect(due)
        return due


def current() -> GuiThreadCollector | None:
    """The running application's collector (None: no application, or none installed)."""
    app = QCoreApplication.instance()
    return app.findChild(GuiThreadCollector) if app is not None else None


def collect_on_gui_thread() -> GuiThreadCollector:
    """Install the collector on the running QApplication (once; later calls return the same one)."""
    app = QCoreApplication.instance()
    if app is None:
        raise RuntimeError("create the QApplication first")
    return current() or GuiThreadCollector(app)
