"""The launcher's side of a run's metric history: it appends ``history.jsonl`` in the run folder.

Every step, global step and eval event the launcher merges, and a load sample
of the run's ranks (and the machine's GPUs) every second from a
``core.gpu.Sampler`` thread, become rows (``core.metrics.rows``; format in
docs/history.md). The file is line-buffered and append-only, so a killed run
keeps everything up to its last whole line. A write that fails (disk full)
turns the history off for the rest of the run; the run itself goes on.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ddpstudio.core import protocol
from ddpstudio.core.gpu import Sampler, Snapshot
from ddpstudio.core.metrics import rows
from ddpstudio.core.plan import Plan

LOAD_INTERVAL_S = 1.0


class HistoryWriter:
    def __init__(self, run_dir: str, plan: Plan, t0: float, interval_s: float = LOAD_INTERVAL_S) -> None:
        self.t0 = t0
        self.interval_s = interval_s
        self._lock = threading.Lock()  # rows come from the launcher loop and the sampler thread
        self._rank_of: dict[int, int] = {}
        self._sampler: Sampler | None = None
        self.error: str | None = None
        self._gpus = plan.gpus  # the chosen GPUs (None: all): only their load is the run's
        self._fh = open(Path(run_dir) / rows.FILE_NAME, "a", encoding="utf-8", buffering=1)
        recipe = plan.recipe
        # A spawn-style script starts its own ranks: how many is known once they join (result.json says it).
        spawned = plan.script is not None and plan.script.style == "spawn"
        self._write(rows.header(run_id=plan.run_id, t0=t0, world_size=None if spawned else plan.world_size,
                                effective_batch=plan.effective_batch, origin=getattr(plan, "origin", "run"),
                                backend=plan.backend, device=plan.device,
                                model=recipe.model if recipe else None,
                                batch_size=recipe.batch_size if recipe else None))

    def _write(self, *items: object) -> None:
        """Whole lines in one write (the file is line-buffered: one system call for all of them)."""
        if not items:
            return
        text = "".join(protocol.encode(item) + "\n" for item in items)
        with self._lock:
            if self._fh is None:
                return
            try:
                self._fh.write(text)
            except (OSError, ValueError) as exc:
                self.error = str(exc)
                self._fh = None

    def record(self, event: protocol.Event) -> None:
        """The measurements an event the launcher merged carries; nothing for other events."""
        self.record_all([event])

    def record_all(self, events: list[protocol.Event]) -> None:
        """The same for several events, in one write."""
        self._write(*(item for event in events for item in rows.event_rows(event, self.t0)))

    def _on_snapshot(self, snapshot: Snapshot) -> None:
        self._write(*rows.snapshot_rows(snapshot, self._rank_of, self.t0, self._gpus))

    def watch(self, rank_pids: dict[int, int]) -> None:
        """Sample these ranks (rank -> pid) from now on; starts the sampler thread the first time."""
        self._rank_of = {pid: rank for rank, pid in rank_pids.items()}
        if self._sampler is None:
            self._sampler = Sampler(interval_s=self.interval_s, on_snapshot=self._on_snapshot)
            self._sampler.start()
        self._sampler.set_pids(rank_pids.values())

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()
        with self._lock:
            fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()
