"""The scaling benchmark on its own thread, with progress and the result coming back as signals.

``Benchmark.run()`` blocks for minutes, so it gets a dedicated thread rather
than a slot in the small ``Workers`` pool (which validation needs meanwhile).
The thread only emits a relay's signals; the relay lives on the GUI thread, so
the slots connected to it run there.
"""

from __future__ import annotations

import threading
import traceback

from PySide6.QtCore import QObject, Signal, Slot

from ddpstudio.core.bench import BenchConfig, BenchResult, Benchmark
from ddpstudio.core.platform import Platform


class _Relay(QObject):
    progressed = Signal(object)  # BenchProgress
    succeeded = Signal(object)  # BenchResult
    failed = Signal(str)  # the reason in one line


class BenchController(QObject):
    bench_progress = Signal(object)  # BenchProgress
    bench_finished = Signal(object)  # BenchResult, or None when it could not run (see bench_failed)
    bench_failed = Signal(str)  # why it could not run (bad world size, a crash in the runner)
    active_changed = Signal(bool)

    def __init__(self, platform: Platform, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.platform = platform
        self.bench: Benchmark | None = None
        self.result: BenchResult | None = None
        self._thread: threading.Thread | None = None
        self._relay = _Relay(self)
        self._relay.progressed.connect(self.bench_progress)
        self._relay.succeeded.connect(self._on_succeeded)
        self._relay.failed.connect(self._on_failed)

    @property
    def active(self) -> bool:
        return self.bench is not None

    def start(self, config: BenchConfig, machine) -> None:
        if self.active:
            return
        relay = self._relay
        bench = Benchmark(config, on_progress=relay.progressed.emit, platform=self.platform, machine=machine)

        def work() -> None:
            try:
                relay.succeeded.emit(bench.run())
            except ValueError as exc:  # PolicyError too: check() refused before anything started
                relay.failed.emit(str(exc))
            except Exception:
                lines = traceback.format_exc().strip().splitlines()
                relay.failed.emit(f"the benchmark crashed: {lines[-1]}")

        self.bench, self.result = bench, None
        self._thread = threading.Thread(target=work, name="ddpstudio-bench")
        self._thread.start()
        self.active_changed.emit(True)

    def stop(self) -> None:
        """Ends the current run (the launcher stops its ranks) and skips the rest; the result still comes."""
        if self.bench is not None:
            self.bench.stop()

    def _done(self) -> None:
        self._thread, self.bench = None, None  # the thread has emitted its last signal and is returning
        self.active_changed.emit(False)

    @Slot(object)
    def _on_succeeded(self, result: BenchResult) -> None:
        self.result = result
        self._done()
        self.bench_finished.emit(result)

    @Slot(str)
    def _on_failed(self, reason: str) -> None:
        self._done()
        self.bench_failed.emit(reason)
        self.bench_finished.emit(None)
