"""What the ranks say, read into the launcher: events, output lines, scraped and reported steps.

Part of :class:`ddpstudio.core.launch.launcher.Launcher` (a mixin over its
state): each poll reads every rank's events file and its stdout/stderr
tails, notes what a rank has shown (joined, trained, an error and when),
emits the events and log lines, turns printed losses of user scripts into
steps (counted once when also reported) and, for a spawn-style script, the
ranks it started.
"""

from __future__ import annotations

import time

from ddpstudio.core import protocol
from ddpstudio.core.launch.outcome import copies_warning, own_groups_warning
from ddpstudio.core.launch.rankproc import RankProc
from ddpstudio.core.launch.rootcause import RankFailure
from ddpstudio.core.launch.scriptsteps import ScriptSteps, scraped_event, took_step
from ddpstudio.core.process.proctable import is_alive

# What the rank helper says of a rank on its own (the script reports nothing by them).
HELPER_NEWS = (protocol.RANK_WATCHED, protocol.RANK_MEETING, protocol.RANK_NO_TORCH)


class RankIntake:
    """The launcher's reading side; expects the attributes :class:`Launcher` sets up."""

    def _pump(self, final: bool = False) -> None:
        for r in self.ranks:
            self._pump_rank(r, final)
        if self.spawned is not None:
            for ev in self.spawned.pump(final):
                if ev.type == protocol.STEP and ev.get("source") == "scraped" and self.spawn_mean is not None:
                    self.spawn_mean.scraped(ev, time.monotonic())  # emitted once it is known not to be seen
                    continue
                self.emit(ev)
                if ev.type == protocol.RANK_STARTED and self._history is not None:
                    self._history.watch(self.spawned.rank_pids())  # load per spawned rank, not the script's
                elif ev.type == protocol.STEP:
                    self._spawned_step(ev)
            if self.spawn_mean is not None:
                for rank in self.spawn_mean.held_ranks():
                    self._emit_all(self.spawn_mean.release(rank, time.monotonic(), final=final))
            if self.spawned.all_joined({r.joined_rank for r in self.ranks if r.joined_rank is not None}):
                for r in self.ranks:
                    r.joined = True  # every rank the script started has joined: no stall to watch
        self._settle_means(final=False)

    def _spawned_step(self, ev: protocol.Event) -> None:
        """Spawn style: a spawned rank's step goes into the mean over ranks once the ranks have said how many
        they are (``rank_joined``'s world size; a rank joins before it trains). spawned.py already counts a
        step both printed and reported once, so every step arrives here as the rank's own."""
        if self.spawn_mean is None and self.world_seen:
            self.spawn_mean = ScriptSteps(self.world_seen)
        if self.spawn_mean is not None and ev.get("source") == "scraped":
            self.spawn_mean.printed(ev)  # read before the world size was known: not held
        elif self.spawn_mean is not None:
            self.spawn_mean.reported(ev)

    def _settle_means(self, final: bool) -> None:
        """The global steps now complete (a script's: the mean over its ranks by step)."""
        for steps in (self.steps, self.spawn_mean):
            if steps is not None:
                self._emit_all(steps.settle(final=final))

    def _pump_rank(self, r: RankProc, final: bool) -> None:
        for line in r.events.read_lines(final):
            for ev in r.parser.feed(line):
                r.speaks = r.speaks or ev.type not in HELPER_NEWS  # the helper's, not the script's
                if r.seen_t is None:
                    r.seen_t = time.time()  # any event at all: the rank's Python runs past its first imports
                if ev.type == protocol.RANK_WATCHED:
                    r.watched = True
                elif ev.type == protocol.RANK_NO_TORCH:
                    r.torchless = True
                elif ev.type == protocol.RANK_JOINED:
                    r.joined = r.in_group = True
                    r.left = False
                    r.joined_rank = ev.rank
                    self._note_joined(r, ev)
                elif ev.type == protocol.RANK_LEFT:
                    r.joined_pids.discard(ev.get("pid"))  # one after another (a sweep's runs) is no copy
                    r.left = not r.joined_pids
                elif ev.type == protocol.STEP:
                    if not took_step(r, ev):
                        continue
                    self._trained(r)
                elif ev.type == protocol.ERROR and r.error_t is None:
                    r.error_t = ev.t
                    if ev.get("stated") is True:  # rank/baddata.py: no traceback of ours under it
                        r.stated = str(ev.get("message") or "")
                self.emit(ev)
                if ev.type == protocol.STEP and self.steps is not None:
                    self.steps.reported(ev)
                elif ev.type == protocol.STEP and self.spawned is not None and r.joined_rank is not None:
                    self._spawned_step(ev)  # a spawn-style script's own process that trains as one of its ranks
        if self.steps is not None:  # after the events file: a step it reported is not counted again
            self._emit_all(self.steps.release(r.rank, time.monotonic()))
        # stderr first: progress bars (tqdm) draw there, summaries are printed after them to stdout.
        for stream, tail in (("stderr", r.err), ("stdout", r.out)):
            for (line, redrawn), start in zip(tail.read_segments(final), tail.starts):
                if not redrawn:  # a progress bar's intermediate updates are read, not logged
                    if stream == "stderr":
                        r.stderr.add(line)
                    if line.strip():
                        r.last.append(line)
                    self.emit(protocol.make_event(protocol.LOG, rank=self._tag(r), stream=stream, line=line))
                if r.scraper is not None and not r.reports_steps:
                    for found in r.scraper.feed(line, (stream, start)):
                        self._scraped(r, found)
        if final and r.scraper is not None:
            for found in r.scraper.flush():  # an evaluation pass the output ended in
                self._scraped(r, found)
        if final and self.steps is not None:
            self._emit_all(self.steps.release(r.rank, time.monotonic(), final=True))
        self._warn_copies()

    def _emit_all(self, events: list[protocol.Event]) -> None:
        for ev in events:
            self.emit(ev)

    def _trained(self, r: RankProc) -> None:
        """A training step: the rank trains; without the helper watching it, it has joined too (the fallback)."""
        r.trained = True
        if not r.watched:
            r.joined = True

    def _note_joined(self, r: RankProc, ev: protocol.Event) -> None:
        """A second process in a group as a rank the launcher started once, while the first still is: each copy of
        the script starts ranks of its own, and separate groups train. Said, and the run is stopped with it as the
        cause: it is never what was asked for (N ranks in one group), and on GPUs the groups share the devices."""
        pid = ev.get("pid")
        if not isinstance(pid, int) or self.spawned is not None:
            return
        r.joined_pids = {p for p in r.joined_pids if is_alive(p, None)} | {pid}
        if len(r.joined_pids) > 1 and not self._groups_warned:
            self._groups_warned = True
            message = own_groups_warning(r.rank, r.joined_pids)
            self.emit(protocol.make_event(protocol.WARNING, message=message))
            self.failures.append(RankFailure(-1, None, time.time(), message, [], self.platform))

    def _warn_copies(self) -> None:
        """Every rank trains and none initialised a process group: say so once, while it trains."""
        if self._copies_warned or self.plan.script is None or self.spawned is not None:
            return
        message = copies_warning(self.ranks, self.plan.world_size)
        if message is not None:
            self._copies_warned = True
            self.emit(protocol.make_event(protocol.WARNING, message=message))

    def _scraped(self, r: RankProc, found) -> None:
        ev = scraped_event(r, r.rank, found)
        if ev is None:
            return  # the helper sees each step and its loss: the printed one is the same step
        if ev.type == protocol.STEP:
            self._trained(r)
        if self.steps is not None:
            self.steps.scraped(ev, time.monotonic())  # emitted once it is known not to be reported too
        else:  # spawn style: the script's own process, outside the ranks it starts
            self.emit(ev)
