"""Ranks that cannot outlive their launcher (POSIX): the kernel's parent-death signal and a lifeline pipe.

Two independent lines, because either alone has a gap:

- Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, set in the child between fork
  and exec (it survives exec): the kernel kills the rank the moment the
  thread that forked it exits. The launcher spawns from its main thread, so
  that is the launcher's death. Not on macOS, lost if a rank execs a setuid
  program.
- A lifeline pipe: the launcher keeps the write end (never written, never
  inherited), each rank inherits the read end and its number in
  ``DDPSTUDIO_LIFELINE_FD``. The kernel closes the write end when the
  launcher dies however it dies, so the rank's watcher
  (:mod:`ddpstudio.rank.lifeline`) reads end-of-file and kills its own
  process group. Works wherever the rank runs our code.

Windows needs neither: the ranks sit in the launcher's Job Object with
KILL_ON_JOB_CLOSE (:mod:`ddpstudio.core.process.winjob`).
``DDPSTUDIO_NO_LIFELINE=1`` in the launcher's environment turns both off; tests
and ``benchmarks/soak.py`` use it to make the orphans an older launcher left.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Callable

from ddpstudio.core.protocol import LIFELINE_FD_ENV

DISABLE_ENV = "DDPSTUDIO_NO_LIFELINE"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def enabled(environ: dict[str, str] | None = None) -> bool:
    return (os.environ if environ is None else environ).get(DISABLE_ENV, "") not in ("1", "true", "yes")


def death_signal_setter() -> Callable[[], None] | None:
    """A ``preexec_fn`` that arms PR_SET_PDEATHSIG in the child; ``None`` off Linux.

    The libc function is looked up here, in the parent, so the child only
    calls it. CPython warns that preexec_fn can deadlock when other threads
    hold locks at fork time; the launcher's only other thread sits in a
    blocking read of stdin and holds none.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the launcher died before the signal was armed
            os.kill(os.getpid(), signal.SIGKILL)

    return arm


class Lifeline:
    """The launcher's end of the lifeline pipe, held open for the launcher's whole life."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()  # both non-inheritable (PEP 446)

    def child_options(self, env: dict[str, str]) -> dict:
        """``Popen`` arguments (and ``env`` additions) that hand the read end to one rank."""
        env[LIFELINE_FD_ENV] = str(self.read_fd)
        options: dict = {"pass_fds": (self.read_fd,)}
        setter = death_signal_setter()
        if setter is not None:
            options["preexec_fn"] = setter
        return options

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.read_fd = self.write_fd = -1
