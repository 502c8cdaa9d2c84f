"""Automatic restart after a crash (``--max-restarts N``): the whole group again, from the last checkpoint.

Part of :class:`ddpstudio.core.launch.launcher.Launcher` (a mixin over its
state). torchrun has ``--max-restarts``, but on Windows its rendezvous asks
for libuv, which the Windows wheels lack (pytorch #148283; the fix, PR
#196855, is still open), so DDP Studio restarts the group itself. When a rank
dies (a non-zero exit or a signal) and nobody asked the run to stop, the
launcher stops the other ranks as for any failure; once every rank is gone it
ends what they left running, deletes the store file (a FileStore cannot be
initialised twice: pytorch #55967; the same unlink ``_finish`` does), and
starts every rank again, at most N times:

- the built-in recipe resumes from the last checkpoint this run saved (or the
  one it was started from with ``--resume``); before the first there is none,
  and it starts again from step 0, which the ``run_restarted`` event says;
- a user's script is started again with the same command, as torchrun does:
  resuming from its own checkpoints is the script's business.

Each restart is one ``run_restarted`` event (its number, the limit, the root
cause of the crash, the step it resumes from). The ranks append to the same
log and events files, so the launcher keeps reading them where it stopped.
A crash beyond the limit ends the run failed with that crash as its root
cause, as without restarts. A stalled rendezvous, a full disk, a stuck rank
(core/launch/hangs.py) or a stop is never restarted.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from ddpstudio.core import protocol
from ddpstudio.core.launch.rankproc import RunState
from ddpstudio.core.launch.scriptsteps import ScriptSteps

STORE_UNLINK_TRIES = 20  # x 0.1 s: a file a dead rank's handle kept open on Windows is released by then


class RunRestarts:
    """The launcher's restarts; expects the attributes :class:`Launcher` sets up."""

    restarts = 0  # restarts done so far
    resume_step: int | None = None  # the step of the last checkpoint this run saved (checkpoint_saved)

    def _note_checkpoint(self, event: protocol.Event) -> None:
        if event.type == protocol.CHECKPOINT_SAVED and isinstance(event.get("step"), int):
            self.resume_step = event.get("step")

    def _restart_due(self) -> bool:
        """Every rank is gone after a rank died: may the group start again?"""
        if self.restarts >= self.plan.max_restarts or self.stop_requested.is_set() or self.spawned is not None:
            return False
        if self.stall is not None or self.disk is not None or self.hang is not None:
            return False  # a rendezvous that stalled, a full disk or a stuck rank would fail the same way again
        return any(f.rank >= 0 for f in self.failures)  # a rank died, not the launcher's own finding

    def _restart(self) -> bool:
        """Clean up after the dead group and start it again; False when the store cannot be reset."""
        root = min(self.failures, key=lambda f: f.t)
        self._pump(final=True)
        self._settle_means(final=True)
        self._sweep()
        problem = self._reset_store()
        if problem:
            self.emit(protocol.make_event(protocol.ERROR, message=f"cannot restart the run: {problem}"))
            return False
        self.restarts += 1
        plan_path, resume_step, how = self._restart_plan()
        self.emit(protocol.make_event(
            protocol.RUN_RESTARTED, restart=self.restarts, max_restarts=self.plan.max_restarts,
            cause=root.summary(), root_cause=root.to_dict(), from_step=resume_step, how=how))
        self.failures, self._killed, self._stop_deadline = [], False, None
        self._watchdog_fired, self._unseen_said, self._attempt_t0 = False, False, time.time()
        if self.steps is not None:  # a script counts its steps again from its start
            self.steps = ScriptSteps(self.plan.world_size)
        self.tree.forget_exited()
        self._forget_beats()
        before = {r.rank: r for r in self.ranks}
        self.ranks = []
        for rank in self.plan.local_ranks():
            if self.stop_requested.is_set():
                break
            self._spawn(rank, plan_path, before.get(rank))
            self._write_processes()
        if self._history is not None:
            self._history.watch({r.rank: r.proc.pid for r in self.ranks})
        self.state = RunState.RUNNING
        return True

    def _reset_store(self) -> str | None:
        """A fresh, empty rendezvous for the next group: the store files deleted (the run's own, and those
        the script's own code names: the dead group's ranks never removed them), and the ranks' stop file."""
        Path(self.run.rank_stop_file).unlink(missing_ok=True)  # else the new ranks stop at once
        # A TCP store lived in rank 0, which is gone: nothing of it to delete.
        for path in ([self.plan.store_path] if self.plan.store_path else []) + self.script_stores:
            problem = _unlink(path)
            if problem:
                return problem
        return None

    def _restart_plan(self) -> tuple[str, int, str]:
        """The plan file the new ranks read, the step they start from, and how, in words."""
        recipe = self.plan.recipe
        if recipe is None:
            return str(self.run.plan), 0, "the script starts again from its beginning (its own resume, if any)"
        if self.resume_step is not None or recipe.resume:
            again = replace(self.plan, recipe=replace(recipe, resume=True))
            path = again.write(self.run.root / f"plan-restart{self.restarts}.json")
            step = self.resume_step if self.resume_step is not None else _saved_step(recipe.checkpoint_dir)
            return str(path), step, f"resuming from the last checkpoint (step {step})"
        why = "no checkpoint folder" if not recipe.checkpoint_dir else "no checkpoint saved yet"
        return str(self.run.plan), 0, f"starting again from step 0 ({why})"


def restart_words(event: protocol.Event) -> str:
    """A ``run_restarted`` event in words: the CLI's line, and the window's log."""
    return (f"restart {event.get('restart')} of {event.get('max_restarts')} after a crash: {event.get('cause')}; "
            f"{event.get('how')}")


def _saved_step(checkpoint_dir: str | None) -> int:
    """The step of the checkpoint a ``--resume`` run started from (its sidecar says; 0 if unreadable)."""
    from ddpstudio.core.checkpoint import CheckpointError, read_info

    try:
        return read_info(checkpoint_dir or "").global_step
    except CheckpointError:
        return 0


def _unlink(path: str) -> str | None:
    for _ in range(STORE_UNLINK_TRIES):
        try:
            Path(path).unlink(missing_ok=True)
            return None
        except PermissionError:  # Windows: a handle of a process that is ending
            time.sleep(0.1)
        except OSError as exc:
            return f"the store file {path} cannot be deleted ({exc.strerror or exc})"
    return f"the store file {path} is still held open by another process"
