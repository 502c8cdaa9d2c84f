"""The launcher: ``python -m ddpstudio.core.launch.launcher PLAN.json [--stdin-control]``.

Starts one fresh interpreter per rank, owns their whole tree, merges the
ranks' events onto stdout (one JSON line each), stops everything when a rank
fails (reporting the earliest failure as the root cause) or when asked to
stop, and watches the rendezvous. Stop requests: SIGINT/SIGTERM, a ``STOP``
file in the run directory, or (with ``--stdin-control``) a ``stop`` line on
stdin or stdin closing. Exit status: 0 finished, 1 failed, 2 refused, 3 stopped,
4 finished but nothing trained, 5 not a distributed script (``protocol.EXIT_CODES``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TextIO

from ddpstudio.core import protocol
from ddpstudio.core.launch.argclash import clashes
from ddpstudio.core.launch.commands import rank_command, rank_env
from ddpstudio.core.launch.diskguard import DiskProblem, GuardedWriter
from ddpstudio.core.launch.ending import RunEnding
from ddpstudio.core.launch.endings import refuse
from ddpstudio.core.launch.hangs import RunHangs
from ddpstudio.core.launch.history import HistoryWriter
from ddpstudio.core.launch.intake import RankIntake
from ddpstudio.core.launch.lastwords import crash_message
from ddpstudio.core.launch.lossparse import LossScraper
from ddpstudio.core.launch.planfile import PlanError, read_plan
from ddpstudio.core.launch.rankproc import RankProc, RunState
from ddpstudio.core.launch.records import RunRecords
from ddpstudio.core.launch.restart import RunRestarts
from ddpstudio.core.launch.rootcause import RankFailure
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.launch.scriptsteps import ScriptSteps
from ddpstudio.core.launch.spawned import SpawnedRanks, is_spawn_style, script_failure
from ddpstudio.core.launch.stall import stall_facts
from ddpstudio.core.launch.stoplisten import listen_for_stop
from ddpstudio.core.launch.tail import LineTail
from ddpstudio.core.plan import Plan
from ddpstudio.core.platform import Platform, current
from ddpstudio.core.process.proctable import create_time
from ddpstudio.core.process.proctree import SWEEP_GRACE_S, make_tree

__all__ = ["Launcher", "RankProc", "RunState", "listen_for_stop", "main", "refuse", "run"]


class Launcher(RankIntake, RunRecords, RunEnding, RunRestarts, RunHangs):
    """One run's launcher. Here: start, the loop, stopping, reaping. Its other parts, over the same state:
    reading what the ranks say (``intake``), its records (``records``), its ending (``ending``), its
    restarts after a crash (``restart``), its watch for a stuck rank (``hangs``)."""

    def __init__(self, plan: Plan, out: TextIO | None = None, platform: Platform | None = None,
                 poll_s: float = 0.1) -> None:
        self.plan, self.platform, self.poll_s = plan, platform or current(), poll_s
        self.run = RunDir.at(plan.run_dir)
        self.out = out if out is not None else sys.stdout
        self.state = RunState.STARTING
        self.stop_requested = threading.Event()
        self.stop_reason = ""
        self._stop_t: float | None = None  # when a stop was asked for (a user, a stop file, our front end)
        self.ranks: list[RankProc] = []
        self.failures: list[RankFailure] = []
        self.stall: RankFailure | None = None
        self.tree = make_tree(self.platform, stop_file=self.run.rank_stop_file)
        self._merged: GuardedWriter | None = None
        self.disk: DiskProblem | None = None  # the run folder's disk refused a write
        self._stop_deadline: float | None = None
        self._killed = False
        self.t0 = time.time()
        self._attempt_t0 = self.t0  # when the ranks were last started (a restart starts them again)
        self._watchdog_fired = False
        self._unseen_said = False  # the watchdog said that a rank was not seen from inside yet
        self.store_preexisted = bool(plan.store_path and os.path.exists(plan.store_path))
        self.script_stores: list[str] = []  # FileStores the script's own code names (records.py)
        self._leftovers_said: set[str] = set()  # of those, the ones found left over and said so
        self._launcher_created: float | None = None
        self._history: HistoryWriter | None = None  # history.jsonl: docs/history.md
        self._finished = False  # run_finished was emitted: the stream has its one ending
        self._claimed = False
        # Spawn style: the script starts its own ranks; they are found and attributed here (spawned.py).
        self.spawned = SpawnedRanks(self.run) if is_spawn_style(plan) else None
        self.world_seen: int | None = None  # the world size the ranks' process groups report
        # A script's steps: printed and reported ones counted once, and their mean over ranks (global_step).
        self.steps = ScriptSteps(plan.world_size) if plan.script is not None and self.spawned is None else None
        # Spawn style: the world size is known once the ranks report it; the mean starts then (intake.py).
        self.spawn_mean: ScriptSteps | None = None
        self._copies_warned = False
        self._groups_warned = False  # more than one process joined as one rank (intake.py)
        self._held: list[protocol.Event] | None = None  # events emitted inside _one_write, not yet written

    # -- output --------------------------------------------------------------
    def emit(self, event: protocol.Event) -> None:
        if event.type == protocol.RANK_JOINED and isinstance(event.get("world_size"), int):
            self.world_seen = max(self.world_seen or 0, event.get("world_size"))
        self._note_checkpoint(event)
        if event.type == protocol.RANK_MEETING and event.get("store_file"):
            self._script_store(event)
        if self._held is not None:
            self._held.append(event)
            return
        self._write([event])

    @contextmanager
    def _one_write(self) -> Iterator[None]:
        """Events emitted inside go out together at the end: one write per sink, not one per event.

        Reading the ranks' output is per-step work when a script prints every step (hundreds of lines a
        second per rank, each a log event, most a scraped step too): a write and a flush per event cost
        the launcher more CPU than the lines themselves, taken from the ranks on a machine whose cores
        they fill (benchmarks/plain_scripts.py, issue 20). Order and content are unchanged.
        """
        if self._held is not None:  # already inside one
            yield
            return
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            if held:
                self._write(held)

    def _write(self, events: list[protocol.Event]) -> None:
        text = "".join(event.to_line() + "\n" for event in events)
        if self._merged is not None:
            self._merged.write(text)
            self._disk_trouble(self._merged.problem)
        if self._history is not None:
            self._history.record_all(events)
        if self.out is None:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):
            # Our front end is gone: nobody would see this run, so stop it.
            self.out = None
            self.request_stop("the program that started the run went away")

    def request_stop(self, reason: str) -> None:
        if not self.stop_requested.is_set():
            self.stop_reason, self._stop_t = reason, time.time()
            self.stop_requested.set()

    # -- start ---------------------------------------------------------------
    def start(self) -> None:
        self.run.create()
        self._merged = GuardedWriter(self.run.merged_events, self.run.root)
        plan_path = str(self.plan.write(self.run.plan))
        if self.plan.store_path and not self.plan.store_is_fixed:  # a fixed path's folder is the user's: never made
            Path(self.plan.store_path).parent.mkdir(parents=True, exist_ok=True)
        self.t0 = self._attempt_t0 = time.time()
        self._history = HistoryWriter(self.plan.run_dir, self.plan, self.t0)
        p = self.plan
        self.emit(protocol.make_event(
            protocol.RUN_STARTED, run_id=p.run_id, run_dir=p.run_dir,
            world_size=None if self.spawned else p.world_size, script_style=p.script.style if p.script else None,
            backend=p.backend, device=p.device, store=p.store, init_method=p.init_method,
            store_path=p.store_path, reasons=p.reasons, effective_batch=p.effective_batch, lr=p.lr,
            kind=p.kind, launcher_pid=os.getpid(),
            epochs=p.recipe.epochs if p.recipe else None, max_steps=p.recipe.max_steps if p.recipe else None))
        for clash in clashes(p):  # the user's --world-size 1 and ours: never overridden silently
            self.emit(protocol.make_event(protocol.WARNING, message=clash.message()))
        self._write_processes()  # recorded before any rank exists, and again after each one
        for rank in p.local_ranks():  # all ranks, or this machine's share of a multi-machine run
            if self.stop_requested.is_set():
                break  # stopped in the first moments (Ctrl+C): start no more ranks
            self._spawn(rank, plan_path)
            self._write_processes()
        # Spawn style: the script's own process is no rank; its ranks are watched once they join.
        self._history.watch({} if self.spawned else {r.rank: r.proc.pid for r in self.ranks})
        self.state = RunState.RUNNING

    def _spawn(self, rank: int, plan_path: str, before: RankProc | None = None) -> None:
        """Start one rank; after a restart (``before``: its predecessor) its files are read on where they were."""
        out = open(self.run.stdout(rank), "ab")
        err = open(self.run.stderr(rank), "ab")
        cmd = rank_command(self.plan, rank, plan_path)
        env = rank_env(self.plan, rank, str(self.run.events_dir), restarts=self.restarts)
        cwd = self.plan.script.cwd if self.plan.script and self.plan.script.cwd else None
        proc = self.tree.spawn(cmd, env, cwd, out, err)
        tails = (before.events, before.out, before.err) if before is not None else (
            LineTail(self.run.rank_events(rank)), LineTail(self.run.stdout(rank)), LineTail(self.run.stderr(rank)))
        rp = RankProc(rank, proc, *tails, [out, err],
                      scraper=LossScraper() if self.plan.script and not self.spawned else None,
                      created=create_time(proc.pid))
        self.ranks.append(rp)
        self.emit(protocol.make_event(protocol.RANK_STARTED, rank=self._tag(rp), pid=proc.pid, command=cmd))

    def _tag(self, r: RankProc) -> int | None:
        """The rank a process's lines are shown under: none for a spawn-style script's own process, unless it joined
        the group itself (Lightning's and Fabric's launchers start the other ranks and train as rank 0)."""
        return r.joined_rank if self.spawned is not None else r.rank

    # -- the loop ------------------------------------------------------------
    def loop(self) -> RunState:
        while True:
            self._tick()
            with self._one_write():
                self._pump()
                self._reap()
            if self.state is RunState.RUNNING:
                if self.run.stop_file.exists():
                    self.request_stop("a stop file was created")
                if self.stop_requested.is_set():
                    self._begin_stop()
                elif self.failures:
                    self._begin_stop()
                else:
                    self._watchdog()
                    self._watch_hangs()
            if self.state is RunState.STOPPING:
                if not self._killed and time.time() >= (self._stop_deadline or 0):
                    self.tree.kill()
                    self._killed = True
            if all(r.exit_code is not None for r in self.ranks):
                if self._restart_due() and self._restart():
                    continue  # the group runs again (core/launch/restart.py)
                break
            self.stop_requested.wait(self.poll_s) if self.state is RunState.RUNNING else time.sleep(self.poll_s)
        self._close_beats()
        with self._one_write():
            self._pump(final=True)
            self._settle_means(final=True)
        self._sweep()
        self._settle()
        return self._finish()

    def _tick(self) -> None:
        """Once per loop turn; a multi-machine node beats and hears the other nodes here (core/nodes)."""

    def _settle(self) -> None:
        """Every rank is gone, the result not yet decided: a node learns here what the other nodes say."""

    def _sweep(self) -> None:
        """Every process of the run ends with it: what the ranks left running is ended, and said."""
        left = self.tree.sweep()
        if left:
            self.emit(protocol.make_event(
                protocol.LOG, stream="launcher",
                line=f"ended {len(left)} process(es) the ranks left running (pid {', '.join(map(str, left))}); "
                     f"SIGKILL after {SWEEP_GRACE_S:g} s for those that ignored SIGTERM"))

    def _begin_stop(self) -> None:
        self.state = RunState.STOPPING
        if self.stop_requested.is_set() and not self.failures:
            self.emit(protocol.make_event(protocol.LOG, stream="launcher", line=f"stopping: {self.stop_reason}"))
        self.tree.terminate()
        self._stop_deadline = time.time() + self.plan.grace_period

    def _reap(self) -> None:
        for r in self.ranks:
            if r.exit_code is not None:
                continue
            code = r.proc.poll()
            if code is None:
                continue
            now = time.time()
            r.exit_code = code
            self._pump_rank(r, final=True)
            for fh in r.files:
                fh.close()
            self.emit(protocol.make_event(protocol.RANK_EXITED, rank=self._tag(r), exit_code=code))
            if code != 0 and not self._ended_by_stop(r, code):
                t, message = min(r.error_t or now, now), r.stated or crash_message(self.plan, r, code, self.platform)
                tail = [] if r.stated else r.stderr.tail()  # a stated error's traceback stays in the rank's log
                self.failures.append(script_failure(code, message, r.stderr, t, self.platform)
                                     if self.spawned else
                                     RankFailure(r.rank, code, t, message, tail, self.platform))

    def _ended_by_stop(self, r: RankProc, code: int) -> bool:
        """A rank that exited non-zero while the run was being stopped: did the stop end it?

        A signal or our kill did. So did an error after a stop was asked for: the first rank to stop
        leaves its peers' collectives without a partner ("Connection closed by peer", exit 1), which is
        the stop, not a failure. An error the rank reported before the stop was asked for stays one.
        The same rule on Windows, where a rank that obeyed the stop file also exits with a plain
        positive code: only the time of its error tells a crash from the stop (issue 19, item 8).
        """
        if self.state is not RunState.STOPPING:
            return False
        if code < 0 or self._killed:
            return True
        asked = self._stop_t if self.stop_requested.is_set() else None
        return asked is not None and (r.error_t is None or r.error_t >= asked)

    def _watchdog(self) -> None:
        """A rendezvous that has not completed within the timeout ends the run, the stall as its cause.

        The timeout counts from when every rank was first seen from inside (an event from the rank helper or
        the reporter), not from their start: importing torch takes longer than a short timeout on a loaded
        machine, and a rank still importing is starting, not stalled. While no rank has been seen (a script
        that reports nothing, run without the helper) that is said once and nothing is killed: it may simply
        be quiet."""
        if self._watchdog_fired or all(r.joined for r in self.ranks):
            return
        limit, now = self.plan.rendezvous_timeout + 5, time.time()
        if now - self._attempt_t0 < limit:
            return
        seen = [r.seen_t for r in self.ranks]
        if all(t is None for t in seen):
            if not self._unseen_said:
                self._unseen_said = True
                self.emit(protocol.make_event(protocol.WARNING, message=self._stall_message() + " (or the script "
                                                                                               "reports no progress)"))
            return
        if None in seen or now - max(seen) < limit:
            return  # a rank still starting, or the last one seen has not had its full timeout yet
        self._watchdog_fired = True
        if not any(r.in_group for r in self.ranks) and any(r.trained and r.watched for r in self.ranks):
            return  # training without a process group: not a stall, N copies (_warn_copies says so)
        waiting = [r.rank for r in self.ranks if not r.joined]
        message = self._stall_message()
        self.emit(protocol.make_event(protocol.ERROR, message=message))
        self.stall = RankFailure(waiting[0] if waiting else -1, None, time.time(), message, [])
        # A rank that never joins keeps the others waiting for ever: end the run, the stall as its cause.
        self.emit(protocol.make_event(protocol.LOG, stream="launcher", line="stopping: the rendezvous stalled"))
        self._begin_stop()

    def _stall_message(self) -> str:
        return "rendezvous stalled: " + "; ".join(stall_facts(self.plan, self.ranks, self.store_preexisted))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddpstudio.core.launch.launcher")
    parser.add_argument("plan", help="the plan.json a front end wrote")
    parser.add_argument("--stdin-control", action="store_true",
                        help="stop when a 'stop' line arrives on stdin or stdin closes")
    args = parser.parse_args(argv)
    try:
        plan = read_plan(args.plan)
    except PlanError as exc:
        return refuse(f"{exc}; the launcher started nothing")
    launcher = Launcher(plan)
    listen_for_stop(launcher, args.stdin_control)
    return run(launcher)


def run(launcher: Launcher) -> int:
    """Claim, start, watch, finish: whatever fails on the way, the ranks are stopped and the stream ended."""
    from ddpstudio.core.rendezvous.claim import ClaimError, ClaimHeld

    try:
        launcher.claim()
    except (ClaimHeld, ClaimError) as exc:
        return refuse(str(exc), launcher.plan.run_dir)
    try:
        try:
            launcher.start()
        except Exception as exc:
            launcher.emit(protocol.make_event(protocol.ERROR, message=f"could not start the ranks: {exc}"))
            launcher.failures.append(RankFailure(-1, None, time.time(), f"could not start the ranks: {exc}"))
            launcher.tree.kill()
            launcher.state = RunState.STOPPING
        state = launcher.loop()
    except BaseException as exc:  # noqa: BLE001 - whatever it was, the ranks must not outlive it
        state = launcher.crashed(exc)
    finally:
        launcher.release_claim()
    return protocol.EXIT_CODES[state.value]


if __name__ == "__main__":
    sys.exit(main())
