"""A background thread that takes a :class:`Snapshot` at a fixed rate.

Plain ``threading`` (no Qt), as in nvitop: the thread reads every device in
one pass plus the watched processes, publishes an immutable snapshot as
:attr:`Sampler.latest` and hands it to an optional callback (the GUI forwards
it through a Qt signal). ``stop()`` wakes the thread through an Event, so it
returns promptly whatever the interval.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable

from .model import Snapshot
from .processes import ProcessMeter
from .source import GpuSource, get_source

log = logging.getLogger(__name__)

SnapshotCallback = Callable[[Snapshot], None]


class Sampler:
    """Samples ``source`` every ``interval_s`` seconds on a daemon thread.

    ``source`` defaults to :func:`get_source` at construction. The watched pids
    (training ranks) may change at any time through :meth:`set_pids`. The
    callback runs on the sampler thread; an exception in it is logged, and
    sampling goes on.
    """

    def __init__(
        self,
        source: GpuSource | None = None,
        interval_s: float = 0.5,
        on_snapshot: SnapshotCallback | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.source = source if source is not None else get_source()
        self.interval_s = interval_s
        self.on_snapshot = on_snapshot
        self._pids: frozenset[int] = frozenset()
        self._meter = ProcessMeter()
        self._latest: Snapshot | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sample_lock = threading.Lock()  # sample_once() may run beside the thread

    @property
    def latest(self) -> Snapshot | None:
        """The newest snapshot, or None before the first one."""
        return self._latest

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def set_pids(self, pids: Iterable[int]) -> None:
        """Watch these processes from the next snapshot on (replaces the previous set)."""
        self._pids = frozenset(int(p) for p in pids)

    def start(self) -> None:
        """Start sampling (the first snapshot is taken at once); a second call does nothing."""
        if self.running:
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,), name="ddpstudio-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop and join the thread; waits at most ``timeout`` for a sample in progress."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def sample_once(self) -> Snapshot:
        """Take one snapshot now, on the calling thread (also what the thread does)."""
        pids = self._pids
        with self._sample_lock:
            try:
                gpus = self.source.sample(pids or None)
            except Exception:  # a broken source must not kill sampling; NvmlSource never raises
                log.exception("GPU source %r failed to sample", self.source)
                gpus = ()
            processes = self._meter.sample(pids)
        snapshot = Snapshot(t=time.time(), mode="gpu" if gpus else "cpu", gpus=gpus, processes=processes)
        self._latest = snapshot
        return snapshot

    def _run(self, stop: threading.Event) -> None:
        next_due = time.monotonic()
        while not stop.is_set():
            snapshot = self.sample_once()
            if self.on_snapshot is not None and not stop.is_set():
                try:
                    self.on_snapshot(snapshot)
                except Exception:
                    log.exception("snapshot callback failed")
            next_due += self.interval_s
            now = time.monotonic()
            if next_due < now:  # fell behind (slow driver, suspended laptop): do not burst
                next_due = now
            stop.wait(next_due - now)
