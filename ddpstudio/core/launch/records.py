"""What a launcher records outside its event stream: processes.json, the registry, the store-path claim.

Part of :class:`ddpstudio.core.launch.launcher.Launcher` (a mixin over its
state). ``ddpstudio clean`` trusts these records: the run's processes
(pid + create time, written before any rank exists and after each one),
its registry record (started, ended), and the claim that keeps a fixed
store path to one run at a time (``core/rendezvous/claim.py``).
"""

from __future__ import annotations

import os

from ddpstudio.core import protocol
from ddpstudio.core.process.lockholders import norm
from ddpstudio.core.process.proctable import create_time

# A script's store file last written this long before the run started was there before it: a leftover.
LEFTOVER_SLACK_S = 1.0


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class RunRecords:
    """The launcher's records; expects the attributes :class:`Launcher` sets up."""

    def _write_processes(self) -> None:
        """processes.json in the run folder, and the run's registry record (what 'ddpstudio clean' trusts)."""
        from ddpstudio.core.cleanup import registry

        me = os.getpid()
        if self._launcher_created is None:
            self._launcher_created = create_time(me)
        ranks = [registry.RankRecord(r.rank, r.proc.pid, r.created) for r in self.ranks]
        self._disk_trouble(self.run.write_json(self.run.processes, {
            "launcher": {"pid": me, "create_time": self._launcher_created},
            "ranks": [{"rank": r.rank, "pid": r.pid, "create_time": r.create_time} for r in ranks],
            "store_path": self.plan.store_path, "port": self.plan.master_port,
        }))
        p = self.plan
        try:
            registry.record_start(p.run_id, run_dir=p.run_dir, launcher_pid=me,
                                  launcher_create_time=self._launcher_created, ranks=ranks,
                                  store_path=p.store_path, store_is_fixed=p.store_is_fixed, port=p.master_port,
                                  started=self.t0, script=os.path.abspath(p.script.path) if p.script else None,
                                  script_stores=self.script_stores, **self.record_fields())
        except OSError as exc:
            self.emit(protocol.make_event(protocol.WARNING, message=f"could not record the run in the registry "
                                          f"({exc}); 'ddpstudio clean' will not know its processes"))

    def _script_store(self, event: protocol.Event) -> None:
        """A rank meets on a FileStore that the script's own code names (``rank_meeting``'s ``store_file``):
        recorded like the run's own store, so that 'ddpstudio clean', a restart and the script's next run
        find it after a kill (core/cleanup/hygiene.py ``prelaunch_script_stores``); said at once when the
        file was there before this run began, a leftover the ranks hang or fail on (pytorch #55967)."""
        path = str(event.get("store_file"))
        if self.plan.store_path and norm(path) == norm(self.plan.store_path):
            return  # this run's own store (the args template's {url})
        if path not in self.script_stores:
            self.script_stores.append(path)
            self._write_processes()
        # Each rank looks before it opens the file: the first to look at a leftover sees it old, whichever
        # rank's event is read first. Said once.
        mtime, size = event.get("store_file_mtime"), event.get("store_file_bytes")
        if path in self._leftovers_said:
            return
        if isinstance(mtime, (int, float)) and mtime < self.t0 - LEFTOVER_SLACK_S and size:  # empty: as new
            self._leftovers_said.add(path)
            age = max(0.0, self.t0 - mtime)
            self.emit(protocol.make_event(protocol.WARNING, message=(
                f"the store file {path}, which your script names, existed before this run started "
                f"(last written {_ago(age)} before): a killed run may have left it behind, and a FileStore needs "
                "a new, empty file, or the ranks hang or fail to connect (pytorch #55967). If the ranks do not "
                "join, stop the run and click Clean up (ddpstudio clean), which removes it now that this run "
                "has used it; or delete it yourself.")))

    def record_fields(self) -> dict:
        """More fields for the run's registry record (the node launcher's: node rank and host)."""
        return {}

    def _record_end(self) -> None:
        from ddpstudio.core.cleanup import registry

        try:
            registry.record_end(self.plan.run_id, self.state.value)
        except OSError:
            pass  # the run is over either way; clean treats a gone launcher as ended

    def claim(self) -> None:
        """Hold the fixed store path for this run's life; raises ``claim.ClaimHeld`` if a live run has it."""
        if self.plan.store_path and self.plan.store_is_fixed:
            from ddpstudio.core.rendezvous import claim

            claim.acquire(self.plan.store_path, self.plan.run_id)
            self._claimed = True

    def release_claim(self) -> None:
        if self._claimed:
            from ddpstudio.core.rendezvous import claim

            try:
                claim.release(self.plan.store_path or "", self.plan.run_id)
            except OSError:
                pass  # stale once we are gone: the next run takes it over
            self._claimed = False
