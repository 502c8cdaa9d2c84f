"""Qt objects in reference cycles are freed on the GUI thread, never by a worker that happened to allocate.

Before this, a worker building resnet18 for the setup check ran the cycle
collector, freed an old window's menu from the worker thread and deadlocked
against the GUI thread (gui/gui_thread_gc.py has the stacks).
"""

from __future__ import annotations

import gc
import threading

import pytest
from PySide6.QtCore import QObject

from ddpstudio.gui.gui_thread_gc import INTERVAL_MS, collect_on_gui_thread

pytestmark = pytest.mark.gui


class InACycle(QObject):
    """A QObject only the cycle collector can free; it writes down which thread freed it."""

    def __init__(self, freed_by: list[str]) -> None:
        super().__init__()
        self.freed_by = freed_by
        self.myself = self

    def __del__(self) -> None:
        self.freed_by.append(threading.current_thread().name)


def allocate_and_keep(kept: list) -> None:
    """Enough new containers to start a gen-0 collection in this thread (if automatic collection were on)."""
    kept.append([[] for _ in range(20 * gc.get_threshold()[0])])


def test_a_cycle_of_qt_objects_is_freed_by_the_gui_thread_not_by_an_allocating_worker(qtbot, qapp):
    collector = collect_on_gui_thread()
    assert collect_on_gui_thread() is collector  # one per application
    assert not gc.isenabled()

    freed_by: list[str] = []
    kept: list = []
    InACycle(freed_by)
    worker = threading.Thread(target=allocate_and_keep, args=(kept,), name="worker")
    worker.start()
    worker.join(timeout=30)
    assert kept and not worker.is_alive()
    assert freed_by == [], "the worker thread ran the collector"

    qtbot.waitUntil(lambda: bool(freed_by), timeout=10 * INTERVAL_MS)  # the next tick, on the GUI thread
    assert freed_by == [threading.main_thread().name]


def test_a_collection_is_due_only_past_a_threshold(qapp):
    collector = collect_on_gui_thread()
    gc.collect()
    assert collector.collect_due() is None
    kept = [[] for _ in range(2 * collector.thresholds[0])]
    assert collector.collect_due() == 0 and kept
