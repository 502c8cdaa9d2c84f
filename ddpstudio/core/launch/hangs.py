"""The launcher's hang watch (``--hang-timeout``, ``--on-hang``): a stuck rank named, its stack dumped, maybe the run ended.

Part of :class:`ddpstudio.core.launch.launcher.Launcher` (a mixin over its
state). Every ``interval / 2`` seconds the launcher reads the ranks' beat
files (rank/heartbeat.py) and asks :class:`HangWatch` whether one rank holds
up the others. When one does, it says so (one ``rank_stuck`` event), asks that
rank for its Python stack (into the rank's own stderr log) and, with
``--on-hang stop``, ends the run failed with the finding as its root cause:
"rank 1 stuck in the data loader at step 812". A stuck run is not restarted
(core/launch/restart.py): the same hang would hold up the next group.

The stack: on POSIX ``SIGUSR1``, which the rank registered with
``faulthandler.register`` (C code: it dumps while the main thread holds the
GIL); on Windows there is no SIGUSR1 and no ``faulthandler.register``
(CPython docs: "Not available on Windows."), so the launcher creates the
rank's dump-request file and the rank's heartbeat thread calls
``faulthandler.dump_traceback`` (Doc/library/faulthandler.rst: "Dump the
traceback of the current thread, or of all threads if *all_threads* is
``True``, into *file*", with no platform restriction).
"""

from __future__ import annotations

import time

from ddpstudio.core import protocol
from ddpstudio.core.launch.hangwatch import HangWatch, Stuck, beat_file, dump_request, watches_hangs
from ddpstudio.core.launch.rankproc import RankProc
from ddpstudio.core.launch.rootcause import RankFailure
from ddpstudio.core.launch.tail import LineTail

# What faulthandler writes above each thread's stack ("Thread 0x... (most recent call first):"), both for the
# SIGUSR1 dump and for dump_traceback on Windows.
STACK_MARK = b"(most recent call first)"
# A dump is whole once the log has stopped growing this long after its first thread's header.
STACK_SETTLE_S = 0.5


class HangFailure(RankFailure):
    """A stuck rank as the run's root cause: its summary is the finding itself."""

    def summary(self) -> str:
        return self.message


class RunHangs:
    """The launcher's hang watch; expects the attributes :class:`Launcher` sets up."""

    hang: HangFailure | None = None  # the stuck rank that ended the run (--on-hang stop)
    _hangs: HangWatch | None = None
    _beats: dict[int, LineTail] | None = None
    _beat_parser = protocol.EventParser()
    _hang_look_t = 0.0

    def _watch_hangs(self) -> None:
        if not watches_hangs(self.plan):
            return
        if self._hangs is None:
            self._hangs, self._beats = HangWatch(self.plan.hang_timeout), {}
        now = time.time()
        if now - self._hang_look_t < self._hangs.interval / 2:
            return
        self._hang_look_t = now
        # A rank that left its group is done training: its exit (a minute of torch.compile's clean-up, say) is no hang.
        live = {r.rank for r in self.ranks if r.exit_code is None and not r.left}
        for rank in live:
            tail = self._beats.setdefault(rank, LineTail(beat_file(self.run.events_dir, rank)))
            for line in tail.read_lines():
                for ev in self._beat_parser.feed(line):
                    if ev.type == protocol.HEARTBEAT:
                        self._hangs.feed(ev)
        stuck = self._hangs.stuck(now, live)
        if stuck is not None:
            self._on_stuck(stuck)

    def _on_stuck(self, stuck: Stuck) -> None:
        action = self.plan.on_hang
        log = str(self.run.stderr(stuck.rank))
        self.emit(stuck.event(log, action))
        self._ask_for_stack(next(r for r in self.ranks if r.rank == stuck.rank), stuck.by_signal)
        if action != "stop":
            return
        self.hang = HangFailure(stuck.rank, None, time.time(), stuck.words(), [stuck.message(log)])
        self.emit(protocol.make_event(protocol.LOG, stream="launcher", line=f"stopping: {stuck.words()} (--on-hang stop)"))
        self._stack_grace(stuck.rank)
        self._begin_stop()

    def _ask_for_stack(self, r: RankProc, by_signal: bool) -> None:
        """The stuck rank's Python stack into its log: SIGUSR1 on POSIX where the rank registered it, else the
        dump-request file (Windows)."""
        import signal

        if by_signal and not self.platform.is_windows and hasattr(signal, "SIGUSR1"):
            try:
                r.proc.send_signal(signal.SIGUSR1)  # type: ignore[attr-defined]
                return
            except OSError:
                pass  # gone meanwhile
        dump_request(self.run.events_dir, r.rank).touch()

    def _stack_grace(self, rank: int) -> None:
        """Before stopping: time for the stack to reach the rank's log (its stderr is that file). SIGUSR1's
        dump is written as the signal arrives, but a busy machine may not run the rank before the stop would;
        the dump-request file waits for the heartbeat thread's next beat. Bounded: a rank frozen whole writes
        nothing."""
        log = self.run.stderr(rank)
        start = log.stat().st_size if log.exists() else 0
        limit = (self._hangs.interval if self._hangs is not None else 0.0) + 3.0
        deadline = time.monotonic() + limit
        seen, size, still_since = False, -1, time.monotonic()
        while time.monotonic() < deadline:
            try:
                with open(log, "rb") as fh:
                    fh.seek(start)
                    written = fh.read()
            except OSError:
                written = b""
            seen = seen or STACK_MARK in written
            if len(written) != size:
                size, still_since = len(written), time.monotonic()
            elif seen and time.monotonic() - still_since >= STACK_SETTLE_S:
                return  # the whole dump: every thread, the main one last (a stop must not cut it short)
            time.sleep(0.1)

    def _forget_beats(self) -> None:
        """A restarted group's ranks beat from the start again."""
        if self._hangs is not None:
            self._hangs.forget()

    def _close_beats(self) -> None:
        for tail in (self._beats or {}).values():
            tail.close()
