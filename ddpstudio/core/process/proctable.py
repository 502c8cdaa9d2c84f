"""A snapshot of the process table, and the one test of "is this still that process".

A recorded process is alive only if its pid exists, is not a zombie, and has
the recorded create time: pids are reused, create times are not. A zombie
counts as gone (it holds no files and cannot be killed; a parent or init
reaps it; in some containers nobody ever does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

# psutil derives create times from clock ticks (Linux) or 100 ns units (Windows);
# the same process reads back identical, but allow for float rounding in JSON.
SAME_TIME_S = 0.05


def same_time(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) < SAME_TIME_S


def create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def is_alive(pid: int, created: float | None) -> bool:
    """Is the process recorded as ``(pid, created)`` still running (not a zombie, pid not reused)?

    Without a recorded create time the pid alone decides (cautious: a live
    stranger counts as alive, so nothing is taken from it).
    """
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return created is None or same_time(proc.create_time(), created)
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # exists but cannot be inspected (another user's): not ours to take over


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int | None
    create_time: float | None
    name: str
    cmdline: str
    zombie: bool


FIELDS = ("ppid", "create_time", "name", "cmdline", "status")


def _readable(proc: psutil.Process) -> dict | None:
    """``proc``'s FIELDS, each None where it cannot be read; None when the process is gone.

    A field that cannot be read is a normal state, whatever psutil raises for it. Not only AccessDenied
    (which ``process_iter(attrs)`` absorbs): psutil's Windows ``name()`` goes through ``exe()``, whose
    ``NtQuerySystemInformation(SystemProcessIdInformation)`` fails with a bare ``OSError`` (WinError 87)
    where the class is not implemented (Wine 8: ``psutil/_pswindows.py`` ``exe``, ``cext.proc_exe``), and
    ``process_iter(attrs)`` lets that end the whole scan.
    """
    info: dict = {}
    with proc.oneshot():
        for name in FIELDS:
            try:
                info[name] = getattr(proc, name)()
            except psutil.ZombieProcess:
                info[name] = None  # a zombie is listed (as one), as process_iter(attrs) did
            except psutil.NoSuchProcess:
                return None
            except (psutil.Error, OSError):
                info[name] = None
    return info


class ProcTable:
    """All processes at one moment; lookups by pid, parent and (POSIX) process group."""

    def __init__(self, procs: dict[int, Proc]) -> None:
        self.procs = procs
        self._children: dict[int, list[Proc]] | None = None
        self._groups: dict[int, list[Proc]] | None = None

    @classmethod
    def take(cls) -> "ProcTable":
        procs: dict[int, Proc] = {}
        for p in psutil.process_iter():
            info = _readable(p)
            if info is None:
                continue  # exited while the table was taken
            cmdline = info.get("cmdline")
            procs[p.pid] = Proc(p.pid, info.get("ppid"), info.get("create_time"), info.get("name") or "?",
                                " ".join(cmdline) if cmdline else "",
                                info.get("status") == psutil.STATUS_ZOMBIE)
        return cls(procs)

    def get(self, pid: int) -> Proc | None:
        return self.procs.get(pid)

    def alive(self, pid: int, created: float | None) -> Proc | None:
        """The live process that *is* the recorded one; ``None`` when gone or reused (or unverifiable)."""
        proc = self.procs.get(pid)
        if proc is None or proc.zombie or not same_time(proc.create_time, created):
            return None
        return proc

    def pid_taken_by_other(self, pid: int, created: float | None) -> bool:
        proc = self.procs.get(pid)
        return proc is not None and not same_time(proc.create_time, created)

    def descendants(self, pid: int, created: float | None, posix: bool) -> list[Proc]:
        """Live processes started by the recorded process ``(pid, created)``, even after it died.

        Children are found by parent pid, each no older than its parent (so a
        reused pid cannot adopt strangers); on POSIX also by process group,
        because a rank leads its own group and its workers stay in it.
        """
        if created is None or self.pid_taken_by_other(pid, created):
            return []
        if self._children is None:
            self._children = {}
            for proc in self.procs.values():
                if proc.ppid is not None:
                    self._children.setdefault(proc.ppid, []).append(proc)
        found: dict[int, Proc] = {}
        stack = [(pid, created)]
        while stack:
            parent, parent_time = stack.pop()
            for child in self._children.get(parent, []):
                if child.pid in found or child.pid == pid or child.create_time is None:
                    continue
                if child.create_time + SAME_TIME_S < parent_time:
                    continue
                found[child.pid] = child
                stack.append((child.pid, child.create_time))
        if posix:
            for proc in self._group(pid):
                if (proc.pid not in found and proc.pid != pid and proc.create_time is not None
                        and proc.create_time + SAME_TIME_S >= created):
                    found[proc.pid] = proc
        return [p for p in found.values() if not p.zombie]

    def _group(self, pgid: int) -> list[Proc]:
        """The members of process group ``pgid`` (POSIX), from one pass over the table."""
        if self._groups is None:
            self._groups = {}
            for proc in self.procs.values():
                try:
                    self._groups.setdefault(os.getpgid(proc.pid), []).append(proc)  # type: ignore[attr-defined]
                except (OSError, AttributeError):
                    continue
        return self._groups.get(pgid, [])
