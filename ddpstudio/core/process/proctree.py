"""Owning the whole process tree of a run, one implementation per platform.

POSIX: every rank leads its own session, so a signal to its process group
reaches the rank and everything it started (DataLoader workers, ...).
Windows: every rank goes into one Job Object with KILL_ON_JOB_CLOSE, so the
ranks die with the launcher even when it is killed without warning.
POSIX has no such object, so each rank gets the parent-death signal and the
lifeline pipe of :mod:`ddpstudio.core.process.parentdeath`.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import IO, Sequence

from ddpstudio.core.platform import Platform

# Windows process creation flags (winbase.h); defined here so Linux can test them.
CREATE_NEW_PROCESS_GROUP = 0x00000200
CREATE_NO_WINDOW = 0x08000000


def popen_options(platform: Platform) -> dict:
    """Extra ``subprocess.Popen`` arguments that put a rank in its own group."""
    if platform.is_windows:
        # A new group so CTRL_BREAK can be aimed at one rank; no console window pops up.
        return {"creationflags": CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW}
    return {"start_new_session": True}


class ProcessTree:
    """The processes of one run; ``terminate`` asks politely, ``kill`` forces."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.procs: list[subprocess.Popen] = []

    def spawn(self, args: Sequence[str], env: dict[str, str], cwd: str | None,
              stdout: IO, stderr: IO) -> subprocess.Popen:
        env = dict(env)
        proc = subprocess.Popen(list(args), env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=stdout, stderr=stderr, **popen_options(self.platform),
                                **self._tie_to_us(env))
        self.procs.append(proc)
        self._adopt(proc)
        return proc

    def _adopt(self, proc: subprocess.Popen) -> None:
        pass

    def _tie_to_us(self, env: dict[str, str]) -> dict:
        """Extra ``Popen`` arguments (and ``env`` entries) that make a rank die with this process."""
        return {}

    def alive(self) -> list[subprocess.Popen]:
        return [p for p in self.procs if p.poll() is None]

    def terminate(self) -> None:
        for proc in self.alive():
            self._signal(proc, polite=True)

    def kill(self) -> None:
        for proc in self.procs:
            self._signal(proc, polite=False)

    def _signal(self, proc: subprocess.Popen, polite: bool) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class PosixTree(ProcessTree):
    def __init__(self, platform: Platform) -> None:
        super().__init__(platform)
        from ddpstudio.core.process.parentdeath import Lifeline, enabled

        # Spawn from the main thread: PR_SET_PDEATHSIG fires when the forking *thread* exits.
        self.lifeline = Lifeline() if enabled() and os.name == "posix" else None

    def _tie_to_us(self, env: dict[str, str]) -> dict:
        return self.lifeline.child_options(env) if self.lifeline is not None else {}

    def close(self) -> None:
        # Only once every rank has exited: closing the write end is what tells a rank we are gone.
        if self.lifeline is not None and not self.alive():
            self.lifeline.close()
            self.lifeline = None

    def _signal(self, proc: subprocess.Popen, polite: bool) -> None:
        try:
            # The group outlives its leader when the rank has children, so signal it even then.
            os.killpg(proc.pid, signal.SIGTERM if polite else signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class WindowsTree(ProcessTree):
    """The ranks in one Job Object; the launcher holds its only handle, so they die when it does.

    The launcher itself is deliberately *not* put into the job: ``kill`` ends
    the ranks with TerminateJobObject, which would then kill the launcher
    before it reports the run's end. The remaining gap is a process a rank
    starts in the moment between CreateProcess and AssignProcessToJobObject
    (a uv venv's python.exe trampoline starts the real interpreter at once).
    Closing it needs CREATE_SUSPENDED, assign, then ResumeThread, and
    ``subprocess`` closes the thread handle right after CreateProcess
    (CPython 3.11 Lib/subprocess.py line 1561), so that needs our own
    CreateProcess call; not done yet (no Windows machine to test it on).
    """

    def __init__(self, platform: Platform) -> None:
        super().__init__(platform)
        from ddpstudio.core.process.winjob import JobObject

        self.job = JobObject()

    def _adopt(self, proc: subprocess.Popen) -> None:
        self.job.assign(proc._handle)  # type: ignore[attr-defined]

    def _signal(self, proc: subprocess.Popen, polite: bool) -> None:
        if polite:
            if proc.poll() is None:
                try:
                    # Reaches the rank only if it shares our console (the CLI case);
                    # otherwise the deadline's TerminateJobObject does the work.
                    os.kill(proc.pid, signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined]
                except OSError:
                    pass
        else:
            self.job.terminate()

    def close(self) -> None:
        self.job.close()


def make_tree(platform: Platform) -> ProcessTree:
    return WindowsTree(platform) if platform.is_windows else PosixTree(platform)
