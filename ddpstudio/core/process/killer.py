"""Stopping processes: politely first, then by force, each one re-identified just before.

POSIX: SIGTERM, a deadline, then SIGKILL; a target that leads its own process
group (our ranks do) is signalled as a group, so its workers go with it.
Windows: there is no polite signal a windowless process receives, so
``terminate`` and then ``kill`` (both TerminateProcess there) per process;
the platform seam lets Linux run that branch too.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field

import psutil

from ddpstudio.core.platform import Platform
from ddpstudio.core.process.proctable import same_time

GRACE_S = 3.0
FORCE_WAIT_S = 3.0
POLL_S = 0.05


@dataclass(frozen=True)
class Target:
    pid: int
    create_time: float | None
    group: bool = False  # signal its whole process group too (only for our ranks, which lead one)


@dataclass
class StopResult:
    """Every target ends up in ``stopped`` or ``left``; ``forced`` names the stopped ones that needed the kill."""

    stopped: list[int] = field(default_factory=list)
    left: list[tuple[int, str]] = field(default_factory=list)  # (pid, why)
    # Of ``stopped``: ended only by SIGKILL (or, on Windows, by TerminateProcess, which is always forced).
    forced: list[int] = field(default_factory=list)


def stop(targets: list[Target], platform: Platform, grace_s: float = GRACE_S,
         force_wait_s: float = FORCE_WAIT_S) -> StopResult:
    result = StopResult()
    procs: list[tuple[Target, psutil.Process]] = []
    me = os.getpid()
    for target in targets:
        if target.pid == me:
            result.left.append((target.pid, "it is this program"))
            continue
        try:
            proc = psutil.Process(target.pid)
            if not same_time(proc.create_time(), target.create_time):
                result.left.append((target.pid, "its pid now belongs to another process; not touched"))
                continue
        except psutil.NoSuchProcess:
            result.stopped.append(target.pid)  # already gone, nothing to do
            continue
        except psutil.Error as exc:
            result.left.append((target.pid, f"cannot inspect it ({type(exc).__name__})"))
            continue
        procs.append((target, proc))
    errors: dict[int, str] = {}
    for target, proc in procs:
        _signal(target, proc, platform, polite=True, errors=errors)
    alive = _wait(procs, grace_s)
    # Windows has no polite signal: its "terminate" is TerminateProcess already, a forced end.
    forced = {t.pid for t, _ in (procs if platform.is_windows else alive)}
    for target, proc in alive:
        _signal(target, proc, platform, polite=False, errors=errors)
    alive = _wait(alive, force_wait_s)
    still = {t.pid for t, _ in alive}
    for target, _ in procs:
        if target.pid in still:
            why = errors.get(target.pid, "still running after a forced kill")
            result.left.append((target.pid, why))
        else:
            result.stopped.append(target.pid)
            if target.pid in forced:
                result.forced.append(target.pid)
    return result


def _signal(target: Target, proc: psutil.Process, platform: Platform, polite: bool,
            errors: dict[int, str]) -> None:
    try:
        if not platform.is_windows and target.group and _leads_group(proc.pid):
            if proc.is_running():  # re-checks the create time right before the group signal
                os.killpg(proc.pid, signal.SIGTERM if polite else signal.SIGKILL)  # type: ignore[attr-defined]
                return
        # psutil re-checks the create time itself before signalling.
        proc.terminate() if polite else proc.kill()
    except psutil.NoSuchProcess:
        pass
    except ProcessLookupError:
        pass
    except (psutil.AccessDenied, PermissionError):
        errors[proc.pid] = "access denied: it belongs to another user or is protected"


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid  # type: ignore[attr-defined]
    except (OSError, AttributeError):
        return False


def _gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def _wait(procs: list[tuple[Target, psutil.Process]], timeout: float) -> list[tuple[Target, psutil.Process]]:
    """The ones still alive after ``timeout`` (zombies count as gone)."""
    deadline = time.monotonic() + timeout
    alive = [(t, p) for t, p in procs if not _gone(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(POLL_S)
        alive = [(t, p) for t, p in alive if not _gone(p)]
    return alive
