"""How a launcher's run ends: its one outcome, result.json, and one ``run_finished``.

Part of :class:`ddpstudio.core.launch.launcher.Launcher` (a mixin over its
state). ``_finish`` turns what happened (the earliest failure, a stall, a
stop, or a clean exit judged by ``outcome.judge`` for user scripts) into the
run's state; a full or read-only disk is the root cause when it is one;
``crashed`` is the way out when the launcher's own code fails: every rank
is killed and the stream still ends with exactly one ``run_finished``.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from ddpstudio.core import protocol
from ddpstudio.core.launch.diskguard import DiskProblem, probe
from ddpstudio.core.launch.endings import extra, failed_event, to_stderr
from ddpstudio.core.launch.outcome import judge, script_library, spawned_none
from ddpstudio.core.launch.rankproc import RunState
from ddpstudio.core.launch.rootcause import RankFailure


class RunEnding:
    """The launcher's ending; expects the attributes :class:`Launcher` sets up."""

    def _finish(self) -> RunState:
        if self.spawned is not None and not self.stop_requested.is_set():
            # A process the script started failed: the cause, if the script ignored it or failed after it (the
            # script's "CalledProcessError: ... torch.distributed.run" follows torchrun's own error, the one to show:
            # Windows' libuv under Wine, 2026-12-07).
            first = min((f.t for f in self.failures), default=None)
            failed = self.spawned.failures(self.platform, stated=first is not None)
            self.failures += [f for f in failed if first is None or f.t < first]
        causes = self.failures + [c for c in (self.stall, self.hang) if c is not None]
        root = self._disk_root(min(causes, key=lambda f: f.t) if causes else None)
        if root is not None:
            self.state = RunState.FAILED
        elif self.stop_requested.is_set():
            self.state = RunState.STOPPED
        else:
            self.state = RunState.FINISHED
        verdict = None
        # Exited 0: but did it train, and together? (Spawn style: once the ranks the script started have
        # joined a group, they did; their steps are not the script process's own.)
        if self.plan.script is not None and self.state is RunState.FINISHED and (
                self.spawned is None or self.world_seen is None):
            verdict = judge(self.ranks, self.plan.world_size, script_library(self.plan))
            if self.spawned is not None and not self.spawned.children and verdict.outcome == protocol.NOT_DISTRIBUTED:
                verdict = spawned_none(self.ranks, self.plan)  # why a spawning script started no rank at all
            self.state = RunState(verdict.outcome)
        duration = time.time() - self.t0
        result = {"run_id": self.plan.run_id, "state": self.state.value, "duration_s": duration,
                  "root_cause": root.to_dict() if root else None,
                  "summary": root.summary() if root else (verdict.summary if verdict else None),
                  "stop_reason": self.stop_reason or None,
                  "exit_codes": {str(r.rank): r.exit_code for r in self.ranks}, "world_size": self.world_seen}
        if self.restarts:
            result["restarts"] = self.restarts  # core/launch/restart.py
        if verdict is not None and verdict.last_output:
            result["last_output"] = verdict.last_output
        self.run.write_json(self.run.result, result)
        self._delete_stores()
        self._record_end()
        self.release_claim()
        self._finished = True
        self.emit(protocol.make_event(protocol.RUN_FINISHED, state=self.state.value, duration_s=duration,
                                      root_cause=result["root_cause"], summary=result["summary"],
                                      run_dir=self.plan.run_dir, world_size=self.world_seen,
                                      **extra(result, "last_output", "restarts")))
        self.tree.close()
        if self._history is not None:
            self._history.close()
        if self._merged is not None:
            self._merged.close()
        return self.state

    def _delete_stores(self) -> None:
        """Once every rank is gone a store file is only a hazard: the next run on its path reads this one's
        addresses. A fresh store is ours alone; a fixed one is ours while we hold its claim (released after
        this); so are the FileStores the script's own code named (records.py). FileStore deletes its file
        itself only when every rank's store object is destroyed, which a killed rank, a script ending in
        os._exit, or two ranks ending together can prevent (its destructor's two counters,
        torch/csrc/distributed/c10d/FileStore.cpp ~FileStore, can interleave so that neither rank sees both
        reach the end: 1 finished run in about 20 here). Several machines share a fixed store file, and a
        script's own path: theirs may still be ending, so those stay."""
        own = self.plan.store_path and (not self.plan.store_is_fixed or self.plan.nodes == 1)
        paths = ([(self.plan.store_path, "", "the next run's check")] if own else []) + (
            [(path, ", which the script names,", "the script's next run") for path in self.script_stores]
            if self.plan.nodes == 1 else [])
        for path, named, next_check in paths:
            try:
                Path(path).unlink(missing_ok=True)
            except OSError as exc:  # Windows: a process the script left running still has it open
                to_stderr(f"the store file {path}{named} was kept: {exc.strerror or exc}; "
                          f"{next_check} or 'Clean up' removes it")

    def crashed(self, exc: BaseException) -> RunState:
        """The launcher's own code failed: kill every rank, and still end the stream with one run_finished."""
        message = f"the launcher itself failed ({type(exc).__name__}: {exc}); every rank was stopped"
        to_stderr(traceback.format_exc().rstrip())
        self.tree.kill()
        deadline = time.monotonic() + 10
        for r in self.ranks:
            try:
                r.proc.wait(max(0.1, deadline - time.monotonic()))  # type: ignore[attr-defined]
            except Exception:
                pass
        if self._finished:
            return self.state
        try:
            self.emit(protocol.make_event(protocol.ERROR, message=message))
            self.failures.append(RankFailure(-1, None, time.time(), message,
                                             traceback.format_exception(exc)[-15:]))
            self._killed, self.state = True, RunState.STOPPING
            self._reap()
            return self._finish()
        except Exception:
            to_stderr(traceback.format_exc().rstrip())
            self.release_claim()
            if not self._finished:
                self._finished = True
                self.emit(failed_event(message, self.plan.run_dir))
            return RunState.FAILED

    def _disk_trouble(self, problem: DiskProblem | None) -> None:
        """A full or read-only run folder ends the run as failed, with the disk as the root cause."""
        if problem is None or self.disk is not None or self.state.value in protocol.EXIT_CODES:
            return  # nothing new, or the run is already over
        self.disk = problem
        self.failures.append(RankFailure(-1, None, time.time(), problem.message))
        self.emit(protocol.make_event(protocol.ERROR, message=problem.message))

    def _disk_root(self, root: RankFailure | None) -> RankFailure | None:
        """When a run fails on a disk that can take no more, the disk is the root cause (ranks die of it too)."""
        if self.disk is not None:
            return next(f for f in self.failures if f.message == self.disk.message)
        found = probe(self.run.root) if root is not None else None
        if found is None:
            return root
        self.disk = found
        return RankFailure(-1, None, root.t, f"{found.message} ({root.summary()})", root.traceback_tail)
