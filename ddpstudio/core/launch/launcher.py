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
import enum
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TextIO

from ddpstudio.core import protocol
from ddpstudio.core.exchange.crash import gloo_cuda_crash_note
from ddpstudio.core.launch.argclash import clashes
from ddpstudio.core.launch.busyport import busy_port_note
from ddpstudio.core.launch.commands import rank_command, rank_env
from ddpstudio.core.launch.diskguard import DiskProblem, GuardedWriter, probe
from ddpstudio.core.launch.exitabort import gloo_exit_abort_note
from ddpstudio.core.launch.history import HistoryWriter
from ddpstudio.core.launch.lossparse import LossScraper
from ddpstudio.core.launch.outcome import LAST_LINES, copies_warning, judge
from ddpstudio.core.launch.planfile import PlanError, read_plan
from ddpstudio.core.launch.scriptsteps import ScriptSteps
from ddpstudio.core.plan import Plan
from ddpstudio.core.platform import Platform, current
from ddpstudio.core.process.proctable import create_time
from ddpstudio.core.process.proctree import SWEEP_GRACE_S, make_tree
from ddpstudio.core.launch.rootcause import RankFailure, StderrTail
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.launch.spawned import SpawnedRanks, is_spawn_style, script_failure
from ddpstudio.core.launch.tail import LineTail


EXIT_REFUSED = 2  # bad plan, or the store path is claimed: nothing was started


class RunState(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    FINISHED = protocol.FINISHED
    FAILED = protocol.FAILED
    STOPPED = protocol.STOPPED
    NOTHING_TRAINED = protocol.NOTHING_TRAINED
    NOT_DISTRIBUTED = protocol.NOT_DISTRIBUTED


@dataclass
class RankProc:
    rank: int
    proc: object
    events: LineTail
    out: LineTail
    err: LineTail
    files: list[IO]
    parser: protocol.EventParser = field(default_factory=protocol.EventParser)
    stderr: StderrTail = field(default_factory=StderrTail)
    scraper: LossScraper | None = None
    joined: bool = False
    reports_steps: bool = False
    speaks: bool = False  # wrote protocol events (the reporter): its silence at the rendezvous means a stall
    exit_code: int | None = None
    error_t: float | None = None
    created: float | None = None  # create time: with the pid, identifies the rank in the registry
    # Seen from inside (issue 11): the rank helper watches it, so it joins by rank_joined only, never
    # by a first printed loss (a script that logs on rank 0 only has silent ranks that did join).
    watched: bool = False
    in_group: bool = False  # said rank_joined: initialised its process group
    trained: bool = False  # reported or printed a training step
    last: deque = field(default_factory=lambda: deque(maxlen=LAST_LINES))  # its last output lines

    def last_lines(self) -> list[str]:
        return list(self.last)


class Launcher:
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
        self._watchdog_fired = False
        self.store_preexisted = bool(plan.store_path and os.path.exists(plan.store_path))
        self._launcher_created: float | None = None
        self._history: HistoryWriter | None = None  # history.jsonl: docs/history.md
        self._finished = False  # run_finished was emitted: the stream has its one ending
        self._claimed = False
        # Spawn style: the script starts its own ranks; they are found and attributed here (spawned.py).
        self.spawned = SpawnedRanks(self.run) if is_spawn_style(plan) else None
        self.world_seen: int | None = None  # the world size the ranks' process groups report
        # A script's steps: printed and reported ones counted once, and their mean over ranks (global_step).
        # Spawn style: the world size is not known in advance, so no global mean (per-rank curves only).
        self.steps = ScriptSteps(plan.world_size) if plan.script is not None and self.spawned is None else None
        self._copies_warned = False

    # -- output --------------------------------------------------------------
    def emit(self, event: protocol.Event) -> None:
        if event.type == protocol.RANK_JOINED and isinstance(event.get("world_size"), int):
            self.world_seen = max(self.world_seen or 0, event.get("world_size"))
        line = event.to_line() + "\n"
        if self._merged is not None:
            self._merged.write(line)
            self._disk_trouble(self._merged.problem)
        if self._history is not None:
            self._history.record(event)
        if self.out is None:
            return
        try:
            self.out.write(line)
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
        if self.plan.store_path:
            Path(self.plan.store_path).parent.mkdir(parents=True, exist_ok=True)
        self.t0 = time.time()
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

    def _spawn(self, rank: int, plan_path: str) -> None:
        out = open(self.run.stdout(rank), "ab")
        err = open(self.run.stderr(rank), "ab")
        cmd = rank_command(self.plan, rank, plan_path)
        env = rank_env(self.plan, rank, str(self.run.events_dir))
        cwd = self.plan.script.cwd if self.plan.script and self.plan.script.cwd else None
        proc = self.tree.spawn(cmd, env, cwd, out, err)
        rp = RankProc(rank, proc, LineTail(self.run.rank_events(rank)), LineTail(self.run.stdout(rank)),
                      LineTail(self.run.stderr(rank)), [out, err],
                      scraper=LossScraper() if self.plan.script and not self.spawned else None,
                      created=create_time(proc.pid))
        self.ranks.append(rp)
        self.emit(protocol.make_event(protocol.RANK_STARTED, rank=self._tag(rp), pid=proc.pid, command=cmd))

    def _tag(self, r: RankProc) -> int | None:
        """The rank a process's lines are shown under: none for a spawn-style script's own process."""
        return None if self.spawned is not None else r.rank

    def _write_processes(self) -> None:
        """processes.json in the run folder, and the run's registry record (what 'ddpstudio clean' trusts)."""
        from ddpstudio.core.cleanup import registry

        me = os.getpid()
        if self._launcher_created is None:
            self._launcher_created = create_time(me)
        ranks = [registry.RankRecord(r.rank, r.proc.pid, r.created) for r in self.ranks]
        self._disk_trouble(self.run.write_json(self.run.processes, {
            "launcher": {"pid": me, "create_time": self._launcher_created},
            "ranks": [{"rank": r.rank, "pid": r.pid, "create_time": r.create_time} for r in ranks],
            "store_path": self.plan.store_path, "port": self.plan.master_port,
        }))
        p = self.plan
        try:
            registry.record_start(p.run_id, run_dir=p.run_dir, launcher_pid=me,
                                  launcher_create_time=self._launcher_created, ranks=ranks,
                                  store_path=p.store_path, store_is_fixed=p.store_is_fixed, port=p.master_port,
                                  started=self.t0, **self.record_fields())
        except OSError as exc:
            self.emit(protocol.make_event(protocol.WARNING, message=f"could not record the run in the registry "
                                          f"({exc}); 'ddpstudio clean' will not know its processes"))

    def record_fields(self) -> dict:
        """More fields for the run's registry record (the node launcher's: node rank and host)."""
        return {}

    def _disk_trouble(self, problem: DiskProblem | None) -> None:
        """A full or read-only run folder ends the run as failed, with the disk as the root cause."""
        if problem is None or self.disk is not None or self.state.value in protocol.EXIT_CODES:
            return  # nothing new, or the run is already over
        self.disk = problem
        self.failures.append(RankFailure(-1, None, time.time(), problem.message))
        self.emit(protocol.make_event(protocol.ERROR, message=problem.message))

    def _disk_root(self, root: RankFailure | None) -> RankFailure | None:
        """When a run fails on a disk that can take no more, the disk is the root cause (ranks die of it too)."""
        if self.disk is not None:
            return next(f for f in self.failures if f.message == self.disk.message)
        found = probe(self.run.root) if root is not None else None
        if found is None:
            return root
        self.disk = found
        return RankFailure(-1, None, root.t, f"{found.message} ({root.summary()})", root.traceback_tail)

    # -- the loop ------------------------------------------------------------
    def loop(self) -> RunState:
        while True:
            self._tick()
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
            if self.state is RunState.STOPPING:
                if not self._killed and time.time() >= (self._stop_deadline or 0):
                    self.tree.kill()
                    self._killed = True
            if all(r.exit_code is not None for r in self.ranks):
                break
            self.stop_requested.wait(self.poll_s) if self.state is RunState.RUNNING else time.sleep(self.poll_s)
        self._pump(final=True)
        if self.steps is not None:
            self._emit_all(self.steps.settle(final=True))
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

    def _pump(self, final: bool = False) -> None:
        for r in self.ranks:
            self._pump_rank(r, final)
        if self.spawned is not None:
            for ev in self.spawned.pump(final):
                self.emit(ev)
                if ev.type == protocol.RANK_STARTED and self._history is not None:
                    self._history.watch(self.spawned.rank_pids())  # load per spawned rank, not the script's
            if self.spawned.all_joined():
                for r in self.ranks:
                    r.joined = True  # every rank the script started has joined: no stall to watch
        if self.steps is not None:
            self._emit_all(self.steps.settle())

    def _pump_rank(self, r: RankProc, final: bool) -> None:
        for line in r.events.read_lines(final):
            for ev in r.parser.feed(line):
                r.speaks = r.speaks or ev.type != protocol.RANK_WATCHED  # the helper's, not the script's
                if ev.type == protocol.RANK_WATCHED:
                    r.watched = True
                elif ev.type == protocol.RANK_JOINED:
                    r.joined = r.in_group = True
                elif ev.type == protocol.STEP:
                    r.reports_steps = True
                    self._trained(r)
                elif ev.type == protocol.ERROR and r.error_t is None:
                    r.error_t = ev.t
                self.emit(ev)
                if ev.type == protocol.STEP and self.steps is not None:
                    self.steps.reported(ev)
        if self.steps is not None:  # after the events file: a step it reported is not counted again
            self._emit_all(self.steps.release(r.rank, time.monotonic()))
        # stderr first: progress bars (tqdm) draw there, summaries are printed after them to stdout.
        for stream, tail in (("stderr", r.err), ("stdout", r.out)):
            for line, redrawn in tail.read_segments(final):
                if not redrawn:  # a progress bar's intermediate updates are read, not logged
                    if stream == "stderr":
                        r.stderr.add(line)
                    if line.strip():
                        r.last.append(line)
                    self.emit(protocol.make_event(protocol.LOG, rank=self._tag(r), stream=stream, line=line))
                if r.scraper is not None and not r.reports_steps:
                    self._scraped(r, r.scraper.feed(line))
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

    def _warn_copies(self) -> None:
        """Every rank trains and none initialised a process group: say so once, while it trains."""
        if self._copies_warned or self.plan.script is None or self.spawned is not None:
            return
        message = copies_warning(self.ranks, self.plan.world_size)
        if message is not None:
            self._copies_warned = True
            self.emit(protocol.make_event(protocol.WARNING, message=message))

    def _scraped(self, r: RankProc, found) -> None:
        if found is None:
            return
        if found.eval:
            ev = protocol.make_event(protocol.EVAL, rank=r.rank, step=found.step, loss=found.loss, source="scraped")
        else:
            self._trained(r)
            ev = protocol.make_event(protocol.STEP, rank=r.rank, step=found.step, loss=found.loss, source="scraped")
        if self.steps is not None:
            self.steps.scraped(ev, time.monotonic())  # emitted once it is known not to be reported too
        else:  # spawn style: the script's own process, outside the ranks it starts
            self.emit(ev)

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
                t, message = min(r.error_t or now, now), self._crash_message(r, code)
                self.failures.append(script_failure(code, message, r.stderr, t, self.platform)
                                     if self.spawned else
                                     RankFailure(r.rank, code, t, message, r.stderr.tail(), self.platform))

    def _ended_by_stop(self, r: RankProc, code: int) -> bool:
        """A rank that exited non-zero while the run was being stopped: did the stop end it?

        A signal or our kill did. So did an error after a stop was asked for: the first rank to stop
        leaves its peers' collectives without a partner ("Connection closed by peer", exit 1), which is
        the stop, not a failure. An error the rank reported before the stop was asked for stays one.
        """
        if self.state is not RunState.STOPPING:
            return False
        if code < 0 or self._killed or self.platform.is_windows:
            return True
        asked = self._stop_t if self.stop_requested.is_set() else None
        return asked is not None and (r.error_t is None or r.error_t >= asked)

    def _crash_message(self, r: RankProc, code: int) -> str:
        """The rank's last words; for a native crash with Gloo on CUDA, what it probably was (pytorch #186535)."""
        message = r.stderr.message()
        busy = busy_port_note("\n".join(r.stderr.tail(40)))
        if busy:
            message = f"{busy} ({message})" if message else busy
        p = self.plan
        note = gloo_cuda_crash_note(p.backend, p.device, getattr(p, "grad_exchange", None), code, self.platform)
        if note is None and p.script is not None:
            note = gloo_exit_abort_note(message, code, r.trained, p.rank_helper, self.platform)
        if note is None:
            return message
        return f"{note} (last output: {message})" if message else note

    def _watchdog(self) -> None:
        if self._watchdog_fired or all(r.joined for r in self.ranks):
            return
        if time.time() - self.t0 < self.plan.rendezvous_timeout + 5:
            return
        self._watchdog_fired = True
        if not any(r.in_group for r in self.ranks) and any(r.trained and r.watched for r in self.ranks):
            return  # training without a process group: not a stall, N copies (_warn_copies says so)
        waiting = [r.rank for r in self.ranks if not r.joined]
        facts = [f"rank(s) {', '.join(map(str, waiting))} had not joined after {self.plan.rendezvous_timeout:g} s"]
        dead = [r.rank for r in self.ranks if r.exit_code is not None and not r.joined]
        if dead:
            facts.append(f"rank(s) {', '.join(map(str, dead))} exited before joining")
        if self.store_preexisted:
            facts.append(f"the store file {self.plan.store_path} existed before this run started: "
                         "a killed run left it behind; run 'ddpstudio clean'")
        if self.plan.store == "tcp" and self.plan.master_port:
            from ddpstudio.core.rendezvous.ports import port_owner

            owner = port_owner(self.plan.master_port)
            if owner and owner.get("pid") not in {r.proc.pid for r in self.ranks}:
                facts.append(f"port {self.plan.master_port} is held by another process ({owner.get('name')}, "
                             f"pid {owner.get('pid')})")
        message = "rendezvous stalled: " + "; ".join(facts)
        if self.plan.script is not None and not any(r.joined or r.speaks for r in self.ranks):
            # A script that reports nothing may simply be quiet; say so, do not kill it. One that uses
            # the reporter says report.joined() after init_process_group, so its silence is a stall.
            self.emit(protocol.make_event(protocol.WARNING, message=message + " (or the script reports no progress)"))
            return
        self.emit(protocol.make_event(protocol.ERROR, message=message))
        self.stall = RankFailure(waiting[0] if waiting else -1, None, time.time(), message, [])
        # A rank that never joins keeps the others waiting for ever: end the run, the stall as its cause.
        self.emit(protocol.make_event(protocol.LOG, stream="launcher", line="stopping: the rendezvous stalled"))
        self._begin_stop()

    # -- the end -------------------------------------------------------------
    def _finish(self) -> RunState:
        if self.spawned is not None and not self.failures and not self.stop_requested.is_set():
            self.failures += self.spawned.failures(self.platform)  # the script ignored a failed rank
        causes = self.failures + ([self.stall] if self.stall else [])
        root = self._disk_root(min(causes, key=lambda f: f.t) if causes else None)
        if root is not None:
            self.state = RunState.FAILED
        elif self.stop_requested.is_set():
            self.state = RunState.STOPPED
        else:
            self.state = RunState.FINISHED
        verdict = None
        # Exited 0: but did it train, and together? (Spawn style: once the ranks the script started have
        # joined a group, they did; their steps are not the script process's own.)
        if self.plan.script is not None and self.state is RunState.FINISHED and (
                self.spawned is None or self.world_seen is None):
            verdict = judge(self.ranks, self.plan.world_size)
            self.state = RunState(verdict.outcome)
        duration = time.time() - self.t0
        result = {"run_id": self.plan.run_id, "state": self.state.value, "duration_s": duration,
                  "root_cause": root.to_dict() if root else None,
                  "summary": root.summary() if root else (verdict.summary if verdict else None),
                  "stop_reason": self.stop_reason or None,
                  "exit_codes": {str(r.rank): r.exit_code for r in self.ranks}, "world_size": self.world_seen}
        if verdict is not None and verdict.last_output:
            result["last_output"] = verdict.last_output
        self.run.write_json(self.run.result, result)
        if self.plan.store_path and not self.plan.store_is_fixed:
            # A fresh store is ours alone; once every rank is gone it is only a hazard.
            Path(self.plan.store_path).unlink(missing_ok=True)
        self._record_end()
        self.release_claim()
        self._finished = True
        self.emit(protocol.make_event(protocol.RUN_FINISHED, state=self.state.value, duration_s=duration,
                                      root_cause=result["root_cause"], summary=result["summary"],
                                      run_dir=self.plan.run_dir, world_size=self.world_seen,
                                      **_extra(result, "last_output")))
        self.tree.close()
        if self._history is not None:
            self._history.close()
        if self._merged is not None:
            self._merged.close()
        return self.state

    def _record_end(self) -> None:
        from ddpstudio.core.cleanup import registry

        try:
            registry.record_end(self.plan.run_id, self.state.value)
        except OSError:
            pass  # the run is over either way; clean treats a gone launcher as ended


    # -- the claim on a fixed store path, and the way out when the loop itself fails --------
    def claim(self) -> None:
        """Hold the fixed store path for this run's life; raises ``claim.ClaimHeld`` if a live run has it."""
        if self.plan.store_path and self.plan.store_is_fixed:
            from ddpstudio.core.rendezvous import claim

            claim.acquire(self.plan.store_path, self.plan.run_id)
            self._claimed = True

    def release_claim(self) -> None:
        if self._claimed:
            from ddpstudio.core.rendezvous import claim

            try:
                claim.release(self.plan.store_path or "", self.plan.run_id)
            except OSError:
                pass  # stale once we are gone: the next run takes it over
            self._claimed = False

    def crashed(self, exc: BaseException) -> RunState:
        """The launcher's own code failed: kill every rank, and still end the stream with one run_finished."""
        message = f"the launcher itself failed ({type(exc).__name__}: {exc}); every rank was stopped"
        traceback.print_exc(file=sys.stderr)
        self.tree.kill()
        deadline = time.monotonic() + 10
        for r in self.ranks:
            try:
                r.proc.wait(max(0.1, deadline - time.monotonic()))  # type: ignore[attr-defined]
            except Exception:
                pass
        if self._finished:
            return self.state
        try:
            self.emit(protocol.make_event(protocol.ERROR, message=message))
            self.failures.append(RankFailure(-1, None, time.time(), message,
                                             traceback.format_exception(exc)[-15:]))
            self._killed, self.state = True, RunState.STOPPING
            self._reap()
            return self._finish()
        except Exception:
            traceback.print_exc(file=sys.stderr)
            self.release_claim()
            if not self._finished:
                self._finished = True
                self.emit(_failed_event(message, self.plan.run_dir))
            return RunState.FAILED


def _extra(result: dict, *keys: str) -> dict:
    """The optional fields of result.json that run_finished also carries."""
    return {k: result[k] for k in keys if k in result}


def _failed_event(message: str, run_dir: str | None = None) -> protocol.Event:
    return protocol.make_event(protocol.RUN_FINISHED, state=protocol.FAILED, duration_s=0.0,
                               root_cause={"rank": -1, "exit_code": None, "t": time.time(), "message": message,
                                           "traceback_tail": []},
                               summary=message, run_dir=run_dir)


def refuse(message: str, run_dir: str | None = None, out: TextIO | None = None) -> int:
    """Nothing was started: one error line on stderr, and the stream's one run_finished (failed). Exit 2."""
    print(f"ddpstudio: error: {message}", file=sys.stderr)
    out = out or sys.stdout
    try:
        out.write(_failed_event(message, run_dir).to_line() + "\n")
        out.flush()
    except (OSError, ValueError):
        pass
    return EXIT_REFUSED


def _watch_stdin(launcher: Launcher) -> None:
    for line in sys.stdin:
        if line.strip().lower() == "stop":
            break
    launcher.request_stop("asked to stop")


def listen_for_stop(launcher: Launcher, stdin_control: bool) -> None:
    """SIGINT/SIGTERM/SIGBREAK (and, with ``stdin_control``, a 'stop' line or stdin's end) stop the run."""
    def on_signal(signum, _frame):
        launcher.request_stop(f"signal {signal.Signals(signum).name}")

    for name in ("SIGINT", "SIGTERM", "SIGBREAK"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), on_signal)
    if stdin_control:
        threading.Thread(target=_watch_stdin, args=(launcher,), daemon=True).start()


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
