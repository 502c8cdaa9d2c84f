"""Owning the whole process tree of a run, one implementation per platform.

POSIX: every rank leads its own session, so a signal to its process group
reaches the rank and everything it started (DataLoader workers, ...).
Windows: every rank goes into one Job Object with KILL_ON_JOB_CLOSE, so the
ranks die with the launcher even when it is killed without warning.
POSIX has no such object, so each rank gets the parent-death signal and the
lifeline pipe of :mod:`ddpstudio.core.process.parentdeath`.

Asking politely: on POSIX SIGTERM to each rank's group. On Windows a console
event cannot do it: each rank, started with CREATE_NO_WINDOW, has a console
of its own, and under pythonw there is none to send from (CPython 3.11's
``os.kill`` can then raise SystemError, cpython #112190). So the launcher
creates the run's stop file, which every rank watches (``rank/stopwatch.py``:
KeyboardInterrupt in its main thread); the Job Object ends what is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
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


SWEEP_GRACE_S = 2.0  # after the ranks exited: how long leftovers get between SIGTERM and SIGKILL

# Tests only: "file" makes the POSIX tree ask through the stop file, the way Windows does.
STOP_CHANNEL_ENV = "DDPSTUDIO_STOP_CHANNEL"


class ProcessTree:
    """The processes of one run; ``terminate`` asks politely, ``kill`` forces."""

    def __init__(self, platform: Platform, stop_file: str | os.PathLike | None = None) -> None:
        self.platform = platform
        self.stop_file = stop_file
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

    def forget_exited(self) -> None:
        """Before a restart: the exited ranks are no longer ours to signal (their pids may be reused)."""
        self.procs = self.alive()

    def terminate(self) -> None:
        if self.stop_file is not None:
            ask_ranks_to_stop(self.stop_file)
        for proc in self.alive():
            self._signal(proc, polite=True)

    def kill(self) -> None:
        for proc in self.procs:
            self._signal(proc, polite=False)

    def _signal(self, proc: subprocess.Popen, polite: bool) -> None:
        raise NotImplementedError

    def sweep(self, grace_s: float = SWEEP_GRACE_S) -> list[int]:
        """Once every rank has exited: end what they left running (politely, then by force); the pids ended."""
        return []

    def close(self) -> None:
        pass


class PosixTree(ProcessTree):
    def __init__(self, platform: Platform, stop_file: str | os.PathLike | None = None) -> None:
        super().__init__(platform, stop_file)
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

    def sweep(self, grace_s: float = SWEEP_GRACE_S) -> list[int]:
        """Members of the ranks' process groups still alive (a child that ignored SIGTERM, or outlived its rank)."""
        groups = {proc.pid for proc in self.procs}
        left = _group_members(groups)
        if not left:
            return []
        for pgid in groups:
            _killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while _group_members(groups) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pgid in groups:
            _killpg(pgid, signal.SIGKILL)
        return left

    def _signal(self, proc: subprocess.Popen, polite: bool) -> None:
        if polite and self.stop_file is not None and os.environ.get(STOP_CHANNEL_ENV) == "file":
            return  # the stop file alone asks, as on Windows
        # The group outlives its leader when the rank has children, so signal it even then.
        _killpg(proc.pid, signal.SIGTERM if polite else signal.SIGKILL)


class WindowsTree(ProcessTree):
    """The ranks in a Job Object of their own, inside the launcher's: they die when the launcher does.

    The launcher first joins a job itself (kill-on-close, its only handle held by the launcher), so
    every rank is born inside it: no moment between CreateProcess and AssignProcessToJobObject where
    a launcher crash could orphan a rank or what it starts. The ranks also join a nested job
    (Windows 8+), which ``kill`` terminates without ending the launcher before it reports the run's
    end. Ranks are the real interpreter, not a venv's python.exe stub (core/launch/interpreter.py).
    """

    lifeline_job = None  # kept open for the launcher's life; its handle dies with the launcher

    def __init__(self, platform: Platform, stop_file: str | os.PathLike | None = None, job=None) -> None:
        super().__init__(platform, stop_file)
        if job is None:
            from ddpstudio.core.process.winjob import JobObject

            # The launcher itself goes into a job first, so every rank is born inside it: no moment
            # between creating a rank and assigning it where a launcher crash would orphan it.
            # Nested jobs (Windows 8+) let the ranks then join a second job of their own, which the
            # hard stop ends without ending the launcher.
            try:
                self.lifeline_job = JobObject()
                self.lifeline_job.assign_current_process()
            except OSError:  # a parent job that forbids nesting: the ranks' own job still kills on close
                self.lifeline_job = None
            job = JobObject()
        self.job = job

    def _adopt(self, proc: subprocess.Popen) -> None:
        self.job.assign(proc._handle)  # type: ignore[attr-defined]

    def _signal(self, proc: subprocess.Popen, polite: bool) -> None:
        pass  # politely = the stop file (``terminate``): no console event, no os.kill

    def kill(self) -> None:
        self.job.terminate()  # every process in the job at once, grandchildren included

    def sweep(self, grace_s: float = SWEEP_GRACE_S) -> list[int]:
        self.job.terminate()  # the ranks are gone: whatever is still in their job is a leftover
        return []

    def close(self) -> None:
        self.job.close()


def make_tree(platform: Platform, stop_file: str | os.PathLike | None = None) -> ProcessTree:
    return WindowsTree(platform, stop_file) if platform.is_windows else PosixTree(platform, stop_file)


def _group_members(groups: set[int]) -> list[int]:
    """Live processes (not zombies) whose process group is one of ``groups``."""
    import psutil

    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) in groups and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except (OSError, psutil.Error):
            continue
    return found


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def ask_ranks_to_stop(stop_file: str | os.PathLike) -> None:
    """Create the stop file the ranks watch (idempotent; a folder that is gone means nobody to ask)."""
    try:
        with open(stop_file, "a", encoding="utf-8"):
            pass
    except OSError:
        pass
