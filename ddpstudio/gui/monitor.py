"""The machine monitor: the core's GPU/psutil Sampler thread, handed to Qt as signals.

The sampler runs on its own thread (NVML and psutil calls never touch the GUI
thread); each immutable Snapshot crosses over through ``snapshot_taken``. The
inventory (which imports torch: seconds) is detected on a worker.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot

from ddpstudio.core.gpu import GpuSource, Inventory, Sampler, Snapshot, detect_inventory, get_source
from ddpstudio.gui.workers import Workers

INTERVAL_S = 0.5


class MachineMonitor(QObject):
    inventory_detected = Signal(object)  # Inventory
    inventory_failed = Signal(str)
    snapshot_taken = Signal(object)  # Snapshot, emitted on the sampler thread, received queued

    def __init__(self, workers: Workers, source: GpuSource | None = None, interval_s: float = INTERVAL_S,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.interval_s = interval_s
        self.workers = workers
        self.source = source if source is not None else get_source()
        self.inventory: Inventory | None = None
        self._sampler: Sampler | None = None
        self._pids: tuple[int, ...] = ()

    def start(self) -> None:
        self.workers.submit(lambda: detect_inventory(self.source), self._on_inventory, self._on_inventory_failed)
        if self._sampler is None:
            self._sampler = Sampler(self.source, self.interval_s, on_snapshot=self._emit)
            self._sampler.set_pids(self._pids)
            self._sampler.start()

    def _emit(self, snapshot: Snapshot) -> None:  # sampler thread
        self.snapshot_taken.emit(snapshot)

    def watch(self, pids: tuple[int, ...]) -> None:
        """Measure these rank processes too (CPU load and memory per rank)."""
        self._pids = tuple(pids)
        if self._sampler is not None:
            self._sampler.set_pids(self._pids)

    def stop(self) -> None:
        """Wakes the sampler thread and joins it (at most one sample in progress: milliseconds)."""
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None

    @Slot(object)
    def _on_inventory(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self.inventory_detected.emit(inventory)

    @Slot(str)
    def _on_inventory_failed(self, text: str) -> None:
        self.inventory_failed.emit(text.strip().splitlines()[-1])
