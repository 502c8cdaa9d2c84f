"""Inside a rank: stop when the launcher creates the run's stop file.

The launcher's polite stop on Windows (and the fallback everywhere): no
console event is needed, so it works under pythonw and with ranks that each
have a hidden console of their own (core/process/proctree.py). The watcher
is a daemon thread that polls for the file and then raises KeyboardInterrupt
in the main thread, exactly what Ctrl+C would do, so scripts that clean up
on Ctrl+C clean up here too. Standard library only, light to import: the rank
helper loads this file on its own at interpreter start-up, before any other
module of ours (rank/helper/sitecustomize.py).
"""

from __future__ import annotations

import _thread
import os
import threading

POLL_S = 0.2
# STATUS_CONTROL_C_EXIT (0xC000013A) as the signed C int os._exit takes: the unsigned value raises
# OverflowError ("Python int too large to convert to C int") instead of exiting.
CONTROL_C_EXIT = 0xC000013A - (1 << 32)
AFTER_STOP = "(after the stop was asked for: a peer had already stopped)"
_started: threading.Thread | None = None
_watched = ""  # the stop file this process watches
_asked = threading.Event()  # the stop file was seen: what fails from now on fails because of the stop
_uncaught = threading.Event()  # and the script let the interrupt go uncaught: it ends after its exit handlers


def asked() -> bool:
    """Whether this rank was asked to stop (an error after that is the stop's, e.g. a peer that left first).

    The file itself counts too: a peer that saw it first may have left before this rank's watcher looked
    (it polls every ``POLL_S``), and this rank's collective then failed with the stop already asked."""
    return _asked.is_set() or bool(_watched and os.path.exists(_watched))


def watch(path: str | None = None, poll_s: float = POLL_S) -> threading.Thread | None:
    """Start watching (once per process); None when there is no stop file to watch."""
    global _started, _watched
    if path is None:
        from ddpstudio.core.protocol import STOP_FILE_ENV

        path = os.environ.get(STOP_FILE_ENV)
    if not path or _started is not None:
        return _started
    _watched = path
    interruptible()
    if os.path.exists(path):  # a stop asked before we started: stop at once
        _asked.set()
        _thread.interrupt_main()
        return None
    _started = threading.Thread(target=_poll, args=(path, poll_s), name="ddpstudio-stopwatch", daemon=True)
    _started.start()
    return _started


def interruptible() -> None:
    """Python's own SIGINT handler, where this process started without one, so the stop can interrupt it.

    A process started with SIGINT ignored (``bash run.sh &``, nohup, some CI runners) keeps the ignore:
    CPython's signal docs, "SIGINT is translated into a KeyboardInterrupt exception if the parent process
    has not changed it". ``_thread.interrupt_main()`` then does nothing (C API docs of
    ``PyErr_SetInterruptEx``: "If the given signal isn't handled by Python (it was set to signal.SIG_DFL
    or signal.SIG_IGN), it will be ignored"), and the stop file would never stop this rank. Ranks run in
    sessions of their own, so no terminal's Ctrl+C reaches them through this handler: only the stop does.
    """
    import signal

    try:
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL):
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: only the main thread may set handlers (and interrupt_main aims there)
        pass


def _poll(path: str, poll_s: float) -> None:
    stop = threading.Event()
    while not stop.wait(poll_s):
        if os.path.exists(path):
            _asked.set()
            _thread.interrupt_main()
            return


def end_promptly_when_interrupted() -> None:
    """A script that lets the stop's KeyboardInterrupt go uncaught ends as Python would end it (the
    traceback, its ``atexit`` handlers, death by SIGINT), but without the interpreter's teardown after that.
    So does a script that fails with any other error once the stop was asked: a collective whose peer
    took the stop first and left fails ("Connection closed by peer"), whichever rank's watcher looked
    first; that rank ends as stopped too, its traceback printed and then ``AFTER_STOP``, as the built-in
    recipe's ranks end (rank/recipe.py), not as a failed rank.

    Tearing down a Gloo group whose peer has already gone can outlast the launcher's grace period; the
    rank was then killed (SIGKILL) although it had taken the stop. So: an ``excepthook`` notes that the
    stop's interrupt went uncaught (and passes it on: torch's own hook, installed by init_process_group,
    prints it with the rank's prefix), and an ``atexit`` handler registered now, which therefore runs after
    every handler the script registers later, ends the process. The rank helper installs this for user
    scripts (rank/helper/sitecustomize.py); the built-in recipe catches the interrupt itself.
    """
    import atexit
    import sys

    previous = sys.excepthook

    def hook(kind, value, tb) -> None:
        stopped = asked()
        if stopped and issubclass(kind, (KeyboardInterrupt, Exception)):
            _uncaught.set()
        previous(kind, value, tb)
        if stopped and issubclass(kind, Exception):
            print(AFTER_STOP, file=sys.stderr, flush=True)

    def end_now() -> None:
        if _uncaught.is_set():
            exit_interrupted()

    sys.excepthook = hook
    atexit.register(end_now)


def exit_interrupted() -> None:
    """End this rank as an uncaught Ctrl+C would, but now: no interpreter teardown.

    After a peer has gone, torch's teardown of a broken Gloo group can outlast the launcher's
    grace period (seen: a rank that had printed its KeyboardInterrupt was still tearing down when
    the hard stop came). Output is flushed first; checkpoints are written atomically anyway.
    """
    import signal
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    if hasattr(signal, "SIGKILL"):  # POSIX: die by SIGINT, as CPython does for an uncaught KeyboardInterrupt
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        # raise() sends it to this thread, so the process ends before the call returns; os.kill may hand it
        # to another thread (Gloo's, the stop watcher) and return first.
        signal.raise_signal(signal.SIGINT)
    os._exit(CONTROL_C_EXIT)  # Windows: what Ctrl+C ends a process with
