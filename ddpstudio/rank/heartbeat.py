"""Inside a rank: a heartbeat with the step and what the rank is doing, for the launcher's hang watch.

The training loop only calls :meth:`Heartbeat.mark` (three attribute writes
and a read of the monotonic clock, which is no system call: Linux reads it
through the vDSO, Windows through QueryPerformanceCounter). A daemon thread
writes the latest step and phase to the rank's beat file every few seconds
(``DDPSTUDIO_HEARTBEAT_S``), with how long the rank has been in that phase,
so the launcher sees a rank whose beat stops advancing (core/launch/hangs.py).

The same thread answers the launcher's request for a stack dump: the request
is a file (``rank<N>.dump`` beside the beat file), because Windows has no
SIGUSR1 and ``faulthandler.register`` is POSIX only (CPython's faulthandler
docs: "Not available on Windows."). ``faulthandler.dump_traceback`` is
available everywhere. On POSIX the rank also registers SIGUSR1, which dumps
even when the main thread holds the GIL and this thread cannot run.
Standard library only.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time

from ddpstudio.core.launch.hangwatch import beat_file, dump_request
from ddpstudio.core.protocol import EVENTS_DIR_ENV, HEARTBEAT, HEARTBEAT_ENV, make_event

FIRST_BEAT_S = 0.1  # until the first mark: the launcher judges only once every rank has beaten (hangwatch.py)
# torch.compile at work: dynamo turning a frame into a graph (convert_frame.py, on a first call or a recompile)
# or inductor compiling a graph (compile_fx.py's compile functions; its runtime wrappers are named otherwise, and
# code already compiled runs with neither on the stack). nanoGPT compiles for about a minute, over the 45 s hang
# timeout: a rank compiling is busy, not stuck (helper trial of 2026-12-08).
COMPILING = (("torch/_dynamo/convert_frame.py", ""), ("torch/_inductor/compile_fx.py", "compile"))
MAX_FRAMES = 400


class Heartbeat:
    """The latest step and phase of this rank; :meth:`start` begins beating them to the launcher."""

    def __init__(self) -> None:
        self.step = 0
        self.phase = ""
        self.since: float | None = None  # time.monotonic() of the last mark; None before the first
        self.by_signal = False  # SIGUSR1 dumps this rank's stack (registered with faulthandler)
        self.trainer: int | None = None  # the training thread's ident

    def mark(self, phase: str, step: int | None = None) -> None:
        """The rank enters ``phase`` (of ``step``): per-step code, so no I/O and no lock."""
        if step is not None:
            self.step = step
        self.phase = phase
        self.since = time.monotonic()

    def start(self, rank: int, events_dir: str, interval: float) -> threading.Thread:
        self.trainer = threading.get_ident()  # the thread that trains (and compiles): the one that marks
        thread = threading.Thread(target=self._beat, args=(rank, events_dir, interval),
                                  name="ddpstudio-heartbeat", daemon=True)
        thread.start()
        return thread

    def _beat(self, rank: int, events_dir: str, interval: float) -> None:
        request = dump_request(events_dir, rank)
        with open(beat_file(events_dir, rank), "a", encoding="utf-8", buffering=1) as out:
            while self.since is None:  # setting up: the first beat comes right after the first mark
                time.sleep(min(interval, FIRST_BEAT_S))
            while True:  # the rank trains: where it is, and for how long it has been there
                still = time.monotonic() - self.since
                busy = {"compiling": True} if still >= interval and compiling(self.trainer) else {}
                out.write(make_event(HEARTBEAT, rank=rank, step=self.step, phase=self.phase, by_signal=self.by_signal,
                                     still_s=round(still, 3), **busy).to_line() + "\n")
                if request.exists():
                    dump_stack()
                    request.unlink(missing_ok=True)
                time.sleep(interval)


class Marked:
    """A loader whose every batch marks ``phase``: a long evaluation moves batch by batch, it is not stuck.

    Everything else (``len``, ``dataset``) is the loader's own."""

    def __init__(self, loader, beat: Heartbeat, phase: str) -> None:
        self.loader, self.beat, self.phase = loader, beat, phase

    def __iter__(self):
        for batch in self.loader:
            self.beat.mark(self.phase)
            yield batch

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str):
        return getattr(self.loader, name)


def compiling(thread: int | None) -> bool:
    """Whether that thread is inside torch.compile's compiler now (looked at only once a rank has been still for
    a beat: one look at its stack)."""
    frame = sys._current_frames().get(thread) if thread is not None else None
    for _ in range(MAX_FRAMES):
        if frame is None:
            return False
        code = frame.f_code
        name = code.co_filename.replace("\\", "/")
        if any(name.endswith(path) and word in code.co_name for path, word in COMPILING):
            return True
        frame = frame.f_back
    return False


def dump_stack() -> None:
    """Every thread's Python stack to stderr (the rank's log), the way faulthandler prints it."""
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    if stream is None:  # pythonw without a log: nowhere to write
        return
    print("ddpstudio: the launcher asked for this rank's stack (no progress: docs/hangs.md)", file=stream, flush=True)
    faulthandler.dump_traceback(file=stream, all_threads=True)


_beat: Heartbeat | None = None


def heartbeat() -> Heartbeat | None:
    """This rank's heartbeat, started on first use; None when the launcher watches no hangs (or no launcher)."""
    global _beat
    if _beat is not None:
        return _beat
    interval, events_dir = os.environ.get(HEARTBEAT_ENV), os.environ.get(EVENTS_DIR_ENV)
    if not interval or not events_dir:
        return None
    _beat = Heartbeat()
    _beat.by_signal = _dump_on_signal()
    _beat.start(int(os.environ.get("RANK", "0")), events_dir, float(interval))
    return _beat


def _dump_on_signal() -> bool:
    """POSIX: SIGUSR1 dumps the stack from C, GIL or not (faulthandler.register; not on Windows). Whether it
    does: the beats say so, and the launcher sends SIGUSR1 only then (its default action ends a process)."""
    import signal

    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    if not hasattr(faulthandler, "register") or not hasattr(signal, "SIGUSR1") or stream is None:
        return False
    try:
        faulthandler.register(signal.SIGUSR1, file=stream, all_threads=True)
        return True
    except (ValueError, OSError, RuntimeError):  # a stderr without a file descriptor: the file request still works
        return False
