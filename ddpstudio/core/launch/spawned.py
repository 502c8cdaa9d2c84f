"""Spawn style: the ranks a user's script starts itself (``torch.multiprocessing.spawn``), seen as ranks.

The launcher starts the script once. Each process the script spawns runs
the rank helper too (same environment), which gives it its own output files
and events file, named by its pid (rank/spawnchild.py). This module finds
those files, learns each child's rank from its ``rank_joined`` (its
``init_process_group``), and turns the child's output into that rank's
``log`` lines and scraped loss ``step`` events; lines written before the
child named its rank wait until it does. When a child's process is gone it
reports the rank's exit (status from ``child-<pid>.exit``; unknown after a
kill). Ending the children is not done here: they are in the script's
process group / Job Object (core/process/proctree.py).
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ddpstudio.core import protocol
from ddpstudio.core.launch.lossparse import LossScraper
from ddpstudio.core.launch.rootcause import RankFailure, StderrTail
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.launch.scriptsteps import MAX_MARKS, scraped_event, took_step
from ddpstudio.core.launch.tail import LineTail
from ddpstudio.core.plan import Plan
from ddpstudio.core.process.proctable import create_time, is_alive

# The same names as in rank/spawnchild.py (loaded there without our packages; tests/test_spawn_style.py).
LOGS_ENV = "DDPSTUDIO_SPAWN_LOGS"
ROOT_ENV = "DDPSTUDIO_SPAWN_ROOT"
CHILD_ENV = "DDPSTUDIO_SPAWN_CHILD"
ELASTIC_ENV = "DDPSTUDIO_SPAWN_ELASTIC"
LAUNCHER_SUFFIX = ".launcher"
SPAWN = "spawn"
_CHILD_LOG = re.compile(r"^child-(\d+)\.out\.log$")
MAX_PENDING = 2000  # lines kept per child until it names its rank
_PER_RANK_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def is_spawn_style(plan: Plan) -> bool:
    return plan.script is not None and plan.script.style == SPAWN


def spawn_env(env: dict[str, str], logs_dir: str | os.PathLike) -> dict[str, str]:
    """The script's environment: no rank variables (every child would inherit RANK=0), and our logs folder."""
    for name in _PER_RANK_ENV + (ROOT_ENV, CHILD_ENV, ELASTIC_ENV):
        env.pop(name, None)
    env[LOGS_ENV] = str(logs_dir)
    return env


@dataclass
class Child:
    pid: int
    created: float | None
    events: LineTail
    out: LineTail
    err: LineTail
    exit_file: Path
    launcher_file: Path  # there once a worker of torchrun's that this child ran became a child: no rank, a launcher
    parser: protocol.EventParser = field(default_factory=protocol.EventParser)
    scraper: LossScraper = field(default_factory=LossScraper)
    stderr: StderrTail = field(default_factory=StderrTail)
    rank: int | None = None
    world_size: int | None = None
    reports_steps: bool = False
    observed_step: int | None = None  # the last step the rank helper saw (rank/steploss.py)
    marks: deque = field(default_factory=lambda: deque(maxlen=MAX_MARKS))  # scriptsteps.step_at
    pending: list[tuple[str, str, bool, int]] = field(default_factory=list)
    exit_code: int | None = None
    ended: bool = False
    ended_t: float | None = None
    launcher: bool = False

    def close(self) -> None:
        for tail in (self.events, self.out, self.err):
            tail.close()


class SpawnedRanks:
    """The children of a spawn-style script; :meth:`pump` gives the events to emit for them."""

    def __init__(self, run: RunDir, alive: Callable[[int, float | None], bool] = is_alive) -> None:
        self.run, self._alive = run, alive
        self.children: dict[int, Child] = {}

    # -- what the launcher asks ---------------------------------------------------------------
    def pump(self, final: bool = False) -> list[protocol.Event]:
        """New events of every child; ``final``: the script's tree is gone, read everything and end them."""
        self._discover()
        out: list[protocol.Event] = []
        for child in list(self.children.values()):
            if child.ended:
                continue
            gone = final or not self._alive(child.pid, child.created)
            out += self._read(child, gone)
            if gone:
                out += self._end(child)
        return out

    @property
    def world_size(self) -> int | None:
        """The world size the children's process groups report (None until one joined)."""
        sizes = [c.world_size for c in self.children.values() if c.world_size]
        return max(sizes) if sizes else None

    def rank_pids(self) -> dict[int, int]:
        """rank -> pid of every child that named its rank (for the per-rank load in history.jsonl)."""
        return {c.rank: c.pid for c in self.children.values() if c.rank is not None}

    def all_joined(self, also: set[int] = frozenset()) -> bool:
        """Every rank of the world has joined: the children's, and ``also`` (the script's own process's)."""
        ranks = {c.rank for c in self.children.values() if c.rank is not None} | also
        return self.world_size is not None and len(ranks) >= self.world_size

    def failures(self, platform, stated: bool = False) -> list[RankFailure]:
        """Children that exited with an error status (for a script that did not notice them failing); ``stated``:
        only those that printed their error (torch.multiprocessing.spawn's children hand theirs to the script,
        whose own failure then says it)."""
        return [_failure(c, platform) for c in self.children.values()
                if c.exit_code not in (None, 0) and (not stated or c.stderr.message())]

    # -- the children -------------------------------------------------------------------------
    def _discover(self) -> None:
        try:
            names = os.listdir(self.run.logs_dir)
        except OSError:
            return
        for name in names:
            match = _CHILD_LOG.match(name)
            if match is None or int(match.group(1)) in self.children:
                continue
            pid = int(match.group(1))
            logs = self.run.logs_dir
            self.children[pid] = Child(pid, create_time(pid), LineTail(self.run.events_dir / f"child-{pid}.jsonl"),
                                       LineTail(logs / f"child-{pid}.out.log"), LineTail(logs / f"child-{pid}.err.log"),
                                       logs / f"child-{pid}.exit", logs / f"child-{pid}{LAUNCHER_SUFFIX}")

    def _read(self, child: Child, final: bool) -> list[protocol.Event]:
        out: list[protocol.Event] = []
        for line in child.events.read_lines(final):  # events first: a rank_joined names the lines after it
            for ev in child.parser.feed(line):
                if ev.type == protocol.RANK_JOINED and ev.rank is not None and child.rank is None:
                    child.rank, child.world_size = ev.rank, ev.get("world_size")
                    out.append(protocol.make_event(protocol.RANK_STARTED, rank=ev.rank, pid=child.pid,
                                                   command=None, spawned=True))
                    out.append(ev)
                    for stream, text, redrawn, start in child.pending:
                        out += self._line(child, stream, text, redrawn, start)
                    child.pending.clear()
                    continue
                if ev.type == protocol.STEP and not took_step(child, ev):
                    continue
                out.append(ev)
        if child.rank is None and not child.launcher and child.launcher_file.exists():
            child.launcher = True  # torchrun's agent, say: what it printed so far is the script's
            out += [self._unranked(child, stream, text) for stream, text, redrawn, _ in child.pending if not redrawn]
            child.pending.clear()
        for stream, tail in (("stderr", child.err), ("stdout", child.out)):
            for (text, redrawn), start in zip(tail.read_segments(final), tail.starts):
                if stream == "stderr" and not redrawn:
                    child.stderr.add(text)  # kept for the root cause, rank or not
                if child.launcher:
                    if not redrawn:
                        out.append(self._unranked(child, stream, text))
                elif child.rank is not None:
                    out += self._line(child, stream, text, redrawn, start)
                elif len(child.pending) < MAX_PENDING:
                    child.pending.append((stream, text, redrawn, start))
        if final and child.rank is not None and not child.reports_steps:
            out += _scraped(child, child.scraper.flush())  # an evaluation pass the output ended in
        return out

    @staticmethod
    def _unranked(child: Child, stream: str, text: str) -> protocol.Event:
        """A line of a process that is no rank (a launcher the script ran): shown as the script's own."""
        return protocol.make_event(protocol.LOG, stream=stream, line=text, pid=child.pid)

    def _line(self, child: Child, stream: str, text: str, redrawn: bool, start: int) -> list[protocol.Event]:
        """One output line of a child that named its rank: its log line, and the loss it may carry."""
        out: list[protocol.Event] = []
        if not redrawn:
            out.append(protocol.make_event(protocol.LOG, rank=child.rank, stream=stream, line=text))
        if not child.reports_steps:
            out += _scraped(child, child.scraper.feed(text, (stream, start)))
        return out

    def _end(self, child: Child) -> list[protocol.Event]:
        child.ended, child.ended_t = True, time.time()
        child.close()
        try:
            child.exit_code = int(child.exit_file.read_text(encoding="ascii").strip())
            child.ended_t = min(child.ended_t, child.exit_file.stat().st_mtime)  # when it exited, not when seen
        except (OSError, ValueError):
            child.exit_code = None  # killed, or crashed natively: nothing was written
        if child.rank is not None:
            return [protocol.make_event(protocol.RANK_EXITED, rank=child.rank, exit_code=child.exit_code,
                                        pid=child.pid, spawned=True)]
        if child.launcher:
            return []  # its ranks' exits are theirs; its own is the script's business (it waits for it)
        out = [protocol.make_event(protocol.LOG, stream=stream, line=text, pid=child.pid)
               for stream, text, redrawn, _ in child.pending if not redrawn]
        if not out and child.exit_code == 0:
            return []  # a helper process of the script's (multiprocessing's resource tracker): not a rank
        code = "unknown" if child.exit_code is None else child.exit_code
        out.append(protocol.make_event(protocol.LOG, stream="launcher",
                                       line=f"a process the script started (pid {child.pid}) ended before it "
                                            f"joined a process group (exit code {code})"))
        return out


def _scraped(child: Child, found: list) -> list[protocol.Event]:
    """The events of losses read from a named child's output (none for a step the helper saw itself)."""
    return [ev for item in found if (ev := scraped_event(child, child.rank, item)) is not None]


def _failure(child: Child, platform) -> RankFailure:
    message = child.stderr.message() or "no error message"
    if child.rank is None:  # failed before it joined: named by its pid
        message = f"a process the script started (pid {child.pid}) failed with exit code {child.exit_code}: {message}"
    return RankFailure(-1 if child.rank is None else child.rank, child.exit_code, child.ended_t or time.time(),
                       message, child.stderr.tail(), platform)


def script_failure(code: int | None, message: str, stderr: StderrTail, t: float, platform) -> RankFailure:
    """The script's own process failed: which of its ranks failed first, when its error says so.

    ``torch.multiprocessing.spawn`` raises ``ProcessRaisedException`` with "-- Process N terminated with
    the following error:" and the child's traceback (torch/multiprocessing/spawn.py).
    """
    tail = stderr.tail()
    process = re.search(r"-- Process (\d+) terminated", "\n".join(stderr.lines))
    who = f"its process {process.group(1)}" if process else "the script"
    text = f"{who} failed first: {message}" if process else message
    return RankFailure(-1, code, t, f"the script (which starts its own ranks) failed, exit code {code}; {text}",
                       tail, platform)
