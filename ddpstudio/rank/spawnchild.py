"""Spawn style: a process the user's script started itself gets output files of its own.

In ``--script-style spawn`` the launcher starts the script once and the
script starts its ranks (``torch.multiprocessing.spawn``). A spawn child is a
fresh interpreter with the parent's environment, so the rank helper's
``sitecustomize`` runs in it too and calls :func:`setup`, which

- leaves the script's own process alone (it marks itself ``ROOT_ENV``; its
  output stays in the files the launcher gave it);
- in a process the script started, points file descriptors 1 and 2 at
  ``child-<pid>.out.log`` / ``child-<pid>.err.log`` in the run's logs folder
  (Python's and native writes alike: on Windows the UCRT's ``_dup2`` also
  moves the Win32 standard handles of a console program, ranks run
  ``python.exe``; ucrt ``lowio/osfinfo.cpp`` ``__acrt_lowio_set_os_handle``),
  and records the exit status in
  ``child-<pid>.exit``; its events go to ``child-<pid>.jsonl`` (rank/emit.py).
  The launcher (core/launch/spawned.py) attributes those files to the rank
  the child names when it calls ``init_process_group``;
- leaves a child's own children (DataLoader workers) writing where their
  parent writes;
- makes a process the script's own process forks a child too, in the fork's
  child hook (Lightning's ddp_fork: no start-up runs in a forked process);
- but where the child is a launcher (the script ran torchrun, whose agent
  starts the ranks: Ultralytics' trainer), the ranks are the launcher's
  workers: a descendant that torchrun's agent started (``TORCHELASTIC_RUN_ID``
  set, and not the one the nearest child ran under) becomes a child itself
  and marks that nearest child ``child-<pid>.launcher``, so that the launcher
  (core/launch/spawned.py) shows its lines as the script's, not as a rank
  that never joined.

Standard library only: the helper loads this file on its own at start-up.
The names below are repeated in core/launch/spawned.py (a test checks they agree).
"""

from __future__ import annotations

import atexit
import os
import sys

LOGS_ENV = "DDPSTUDIO_SPAWN_LOGS"  # set by the launcher in spawn style: the run's logs folder
ROOT_ENV = "DDPSTUDIO_SPAWN_ROOT"  # the pid of the script's own process
CHILD_ENV = "DDPSTUDIO_SPAWN_CHILD"  # the pid of the spawned rank this process is (or descends from)
ELASTIC_ENV = "DDPSTUDIO_SPAWN_ELASTIC"  # the TORCHELASTIC_RUN_ID that child ran under ("": none)
ELASTIC_RUN = "TORCHELASTIC_RUN_ID"  # torchrun's agent sets it for each worker it starts (local_elastic_agent.py)
LAUNCHER_SUFFIX = ".launcher"


def child_file(folder: str, pid: int, suffix: str) -> str:
    return os.path.join(folder, f"child-{pid}{suffix}")


def setup() -> bool:
    """Redirect this process's output if it is a child the script spawned; True when it is."""
    logs = os.environ.get(LOGS_ENV)
    if not logs:
        return False
    if ROOT_ENV not in os.environ:
        # os.environ writes through to the process environment (putenv), so every child started later
        # inherits it; multiprocessing in a Windows venv passes os.environ.copy() to CreateProcess itself
        # (multiprocessing/popen_spawn_win32.py, bpo-35797).
        os.environ[ROOT_ENV] = str(os.getpid())
        _watch_forks(logs)
        return False
    if CHILD_ENV in os.environ:
        run_id = os.environ.get(ELASTIC_RUN, "")
        if not run_id or run_id == os.environ.get(ELASTIC_ENV, ""):
            return False  # a spawned rank's own child: its output is its rank's
        _mark_launcher(child_file(logs, int(os.environ[CHILD_ENV]), LAUNCHER_SUFFIX))  # torchrun's worker: a rank
    _become_child(logs)
    _record_exit(child_file(logs, os.getpid(), ".exit"))
    return True


def _become_child(logs: str) -> None:
    pid = os.getpid()
    os.environ[CHILD_ENV] = str(pid)
    os.environ[ELASTIC_ENV] = os.environ.get(ELASTIC_RUN, "")
    for fd, suffix in ((1, ".out.log"), (2, ".err.log")):
        target = os.open(child_file(logs, pid, suffix), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)


def _watch_forks(logs: str) -> None:
    """A rank the script's own process forks (Lightning's ddp_fork and ddp_notebook, Accelerate's
    notebook_launcher on Linux) runs no start-up of its own: it becomes a child here, in ``os.fork``'s child hook.
    Forked processes end in ``os._exit`` (multiprocessing's popen_fork), past atexit: the exit is written there.
    No fork on Windows: nothing to watch."""
    if not hasattr(os, "register_at_fork"):
        return
    root = os.getpid()

    def forked() -> None:
        if os.getppid() != root or CHILD_ENV in os.environ:
            return  # the root's own process after a fork of a child's, or a grandchild: not a rank of the script
        try:
            _become_child(logs)
            _record_os_exit(child_file(logs, os.getpid(), ".exit"))
        except OSError:
            pass  # the run's folder is gone: the process runs on as it would without us

    os.register_at_fork(after_in_child=forked)


def _record_os_exit(path: str) -> None:
    real_exit = os._exit

    def _exit(code: int) -> None:
        try:
            with open(path, "w", encoding="ascii") as fh:
                fh.write(str(code))
        except OSError:
            pass
        real_exit(code)

    os._exit = _exit


def _mark_launcher(path: str) -> None:
    try:
        with open(path, "a", encoding="ascii"):
            pass
    except OSError:
        pass  # the run's folder is gone: nothing reads it


def _record_exit(path: str) -> None:
    """Write the exit status at interpreter exit: ``sys.exit``'s argument, 1 after an uncaught exception.

    multiprocessing's spawn children end through ``sys.exit(exitcode)`` (``spawn_main``), and
    torch's ``_wrap`` calls ``sys.exit(1)`` after a failure, so the status is seen there. A kill
    leaves no file; the launcher then reports the exit status as unknown.
    """
    status: list[object] = [0]
    real_exit, real_hook = sys.exit, sys.excepthook

    def exit(code: object = None) -> None:
        status[0] = code
        real_exit(code)

    def excepthook(kind, value, tb) -> None:
        status[0] = 1
        real_hook(kind, value, tb)

    def write() -> None:
        code = status[0]
        value = 0 if code is None else code if isinstance(code, int) else 1
        try:
            with open(path, "w", encoding="ascii") as fh:
                fh.write(str(value))
        except OSError:
            pass

    sys.exit, sys.excepthook = exit, excepthook
    atexit.register(write)
