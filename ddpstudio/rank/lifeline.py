"""Inside a rank: die with the launcher (the rank's end of :mod:`ddpstudio.core.process.parentdeath`).

The launcher hands each rank the read end of a pipe whose write end only it
holds; end-of-file on it means the launcher is gone, and a rank nobody
watches or stops must not keep training (or keep a FileStore in use). Call
:func:`watch_launcher` first thing in a rank: the built-in recipe does, and
the rank helper does for user scripts (it loads this file alone, so nothing
here imports a package of ours). Standard library only.
"""

from __future__ import annotations

import os
import signal
import threading

LIFELINE_FD_ENV = "DDPSTUDIO_LIFELINE_FD"  # core.protocol.LIFELINE_FD_ENV (tests/test_rank_helper.py: the same)


def watch_launcher(environ: dict[str, str] | None = None) -> bool:
    """Start a daemon thread that kills this rank's process group when the launcher dies.

    Returns ``False`` (and does nothing) when not started by our launcher
    (by hand, under torchrun, on Windows where the Job Object does this).
    """
    env = os.environ if environ is None else environ
    raw = env.pop(LIFELINE_FD_ENV, None)  # not for the rank's own children
    if not raw:
        return False
    try:
        fd = int(raw)
        os.fstat(fd)
    except (ValueError, OSError):
        return False
    threading.Thread(target=_wait_for_eof, args=(fd,), name="ddpstudio-lifeline", daemon=True).start()
    return True


def _wait_for_eof(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            return  # the descriptor was closed under us: not a sign of the launcher's death
    _die()


def _die() -> None:
    """SIGKILL our whole process group (a rank leads its own, with its DataLoader workers in it)."""
    try:
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGKILL)
