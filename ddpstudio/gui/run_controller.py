"""One run at a time: the launcher in a QProcess, its stdout parsed into typed signals.

The launcher is the same process the CLI starts (``launcher_command``); we
talk to it only through its stdin ("stop") and its stdout (protocol events,
read by the shared :class:`EventParser` and dispatched to ``_handle_<type>``).
Nothing here blocks: the process reports through QProcess signals, a QTimer
polls its liveness and enforces the stop deadline.
"""

from __future__ import annotations

import os
import sys
from collections import deque

from PySide6.QtCore import QObject, QProcess, QTimer, Signal, Slot

from ddpstudio.core import protocol
from ddpstudio.core.launch.commands import console_python
from ddpstudio.core.launch.endings import EXIT_REFUSED
from ddpstudio.core.launch.launcher import RunState
from ddpstudio.core.plan import Plan
from ddpstudio.core.platform import Platform, current
from ddpstudio.core.policy import plan_file
from ddpstudio.core.process.exitcodes import describe_exit
from ddpstudio.core.launch.session import launcher_command
from ddpstudio.gui import run_tree
from ddpstudio.gui.exit_words import rank_exit_text

STOP_DEADLINE_MS = 9000  # the launcher needs grace (5 s) + a kill; past this we end the tree ourselves
POLL_MS = 500
ERROR_PREFIX = "ddpstudio: error:"  # the one line a refusal prints (cli/run.fail, launcher.refuse)


ACTIVE = (RunState.STARTING, RunState.RUNNING, RunState.STOPPING)
IDLE = "idle"  # the state before the first run: no RunState yet


class RunController(QObject):
    run_state_changed = Signal(str)
    run_started = Signal(object)  # the run_started Event
    ranks_changed = Signal(object)  # {rank: pid}
    metrics_received = Signal(object)  # step, global_step, epoch_end, checkpoint_saved Events
    log_received = Signal(object, str, str)  # rank (None: launcher), stream, line
    problem_reported = Signal(object)  # warning and error Events
    batch_balanced = Signal(object)  # a batch_balanced Event: each rank's batch, sized for its speed (rank/balance.py)
    rank_stuck = Signal(object)  # a rank_stuck Event: a rank holds up the others (core/launch/hangs.py)
    run_finished = Signal(object)  # the run_finished Event (made up here if the launcher died silently)
    join_code_received = Signal(object)  # a multi-machine host's join_code Event (its code holds the token)
    node_joined = Signal()  # a multi-machine host: one more machine has joined
    node_news = Signal(object)  # a node launcher's log event with node_news (a node's new state) and node

    def __init__(self, platform: Platform | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.platform = platform or current()
        self.state: RunState | None = None
        self.plan: Plan | None = None
        self.process: QProcess | None = None
        self.parser = protocol.EventParser()
        self.pids: dict[int, int] = {}
        self._buffer = b""
        self._stderr: deque[str] = deque(maxlen=40)
        self._stop_asked = False
        self._finished_event: protocol.Event | None = None
        self.events_seen = 0
        self.exit_code: int | None = None
        self.run_dir = ""
        self._poll = QTimer(self)
        self._poll.setInterval(POLL_MS)
        self._poll.timeout.connect(self._check_alive)
        self._deadline = QTimer(self)
        self._deadline.setSingleShot(True)
        self._deadline.timeout.connect(self._force_stop)

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def state_name(self) -> str:
        return self.state.value if self.state is not None else IDLE

    # -- start / stop --------------------------------------------------------
    def start(self, plan: Plan | None, command: list[str] | None = None, stdin_text: str = "",
              folder: str | None = None) -> None:
        """Start the launcher for a plan already written to its run folder, or ``command`` instead
        (``ddpstudio host|join --json``, which plans itself: then ``plan`` is None). ``stdin_text``
        goes to its stdin first (a join code: never on a command line others can read). ``folder``: the
        command's working folder (a hosted script's, which the command line has no option for), else the
        window's."""
        if self.active:
            raise RuntimeError("a run is already in progress")
        if plan is None and not command:
            raise ValueError("a run needs a plan or a command")
        self.plan, self.pids, self._buffer = plan, {}, b""
        self.exit_code, self.run_dir = None, plan.run_dir if plan is not None else ""
        self.parser = protocol.EventParser()
        self._stderr.clear()
        self._stop_asked, self._finished_event, self.events_seen = False, None, 0
        proc = QProcess(self)
        self._detach(proc)
        cmd = command or launcher_command(plan_file(plan), launcher_python(sys.executable, self.platform))
        proc.setProgram(cmd[0])
        proc.setArguments(cmd[1:])
        if folder:
            proc.setWorkingDirectory(folder)
        proc.readyReadStandardOutput.connect(self._read_stdout)
        proc.readyReadStandardError.connect(self._read_stderr)
        proc.finished.connect(self._on_exit)
        proc.errorOccurred.connect(self._on_error)
        self.process = proc
        self._set_state(RunState.STARTING)
        proc.start()
        if stdin_text:
            proc.write(stdin_text.encode("utf-8"))
        self._poll.start()

    def _detach(self, proc: QProcess) -> None:
        """On POSIX the launcher gets its own session, as the CLI gives it.

        On Windows there is nothing to set, and nothing could be: PySide6 6.11.3's Windows
        wheel has no ``QProcess.setCreateProcessArgumentsModifier`` (its QtCore.pyi lists only
        ``setNativeArguments``). Qt itself starts the child with CREATE_NO_WINDOW when the
        window has no console (qprocess_win.cpp: ``GetConsoleWindow() ? 0 : CREATE_NO_WINDOW``),
        so python.exe runs the launcher with a hidden console, and we stop it through stdin.
        """
        if not self.platform.is_windows and hasattr(proc, "setUnixProcessParameters"):
            proc.setUnixProcessParameters(QProcess.UnixProcessFlag.CreateNewSession)

    def stop(self) -> None:
        """Ask the launcher to stop the whole tree; past the deadline we end it ourselves."""
        if self.process is None or not self.active or self._stop_asked:
            return
        self._stop_asked = True
        self._set_state(RunState.STOPPING)
        self.log_received.emit(None, "studio", "stopping the run")
        if self.process.state() == QProcess.ProcessState.Running:
            self.process.write(b"stop\n")
            self.process.closeWriteChannel()  # a launcher that missed the line stops on EOF too
        self._deadline.start(STOP_DEADLINE_MS)

    @Slot()
    def _force_stop(self) -> None:
        if self.process is None or self.process.state() == QProcess.ProcessState.NotRunning:
            return
        self.log_received.emit(None, "studio", "the launcher did not stop in time; ending its processes")
        if self.run_dir:
            run_tree.kill_recorded(self.run_dir)
        self.process.kill()

    # -- reading -------------------------------------------------------------
    @Slot()
    def _read_stdout(self) -> None:
        if self.process is None:
            return
        data = self._buffer + bytes(self.process.readAllStandardOutput().data())
        *lines, self._buffer = data.split(b"\n")
        for line in lines:
            for event in self.parser.feed(line):
                self.events_seen += 1
                handler = getattr(self, f"_handle_{event.type}", None)
                if handler is not None:
                    handler(event)

    @Slot()
    def _read_stderr(self) -> None:
        if self.process is None:
            return
        text = bytes(self.process.readAllStandardError().data()).decode("utf-8", errors="replace")
        for line in text.splitlines():
            self._stderr.append(line)
            self.log_received.emit(None, "launcher", line)

    def _handle_join_code(self, ev: protocol.Event) -> None:
        self.join_code_received.emit(ev)

    def _handle_run_started(self, ev: protocol.Event) -> None:
        self.run_dir = self.run_dir or str(ev.get("run_dir") or "")
        if self.state is RunState.STARTING:
            self._set_state(RunState.RUNNING)
        self.run_started.emit(ev)

    def _handle_rank_started(self, ev: protocol.Event) -> None:
        if ev.rank is not None and isinstance(ev.get("pid"), int):
            self.pids[ev.rank] = ev.get("pid")
            self.ranks_changed.emit(dict(self.pids))
        self.metrics_received.emit(ev)

    def _handle_rank_joined(self, ev: protocol.Event) -> None:
        self.log_received.emit(ev.rank, "studio", "joined the process group")
        self.metrics_received.emit(ev)  # the progress line counts who has joined

    def _handle_step(self, ev: protocol.Event) -> None:
        self.metrics_received.emit(ev)

    # rank_meeting: the progress line tells "starting Python and PyTorch" from "waiting for the others"
    _handle_global_step = _handle_epoch_end = _handle_eval = _handle_model_saved = _handle_step
    _handle_rank_meeting = _handle_step

    def _handle_checkpoint_saved(self, ev: protocol.Event) -> None:
        self.metrics_received.emit(ev)
        self.log_received.emit(ev.rank, "studio", f"checkpoint saved at step {ev.get('step')}: {ev.get('path')}")

    def _handle_log(self, ev: protocol.Event) -> None:
        self.log_received.emit(ev.rank, str(ev.get("stream", "")), str(ev.get("line", "")))
        if ev.get("node_news") == "joined":
            self.node_joined.emit()
        if ev.get("node_news") and isinstance(ev.get("node"), int):
            self.node_news.emit(ev)

    def _handle_warning(self, ev: protocol.Event) -> None:
        self.log_received.emit(ev.rank, "warning", str(ev.get("message", "")))
        self.problem_reported.emit(ev)

    def _handle_error(self, ev: protocol.Event) -> None:
        self.log_received.emit(ev.rank, "error", str(ev.get("message", "")))
        self.problem_reported.emit(ev)

    def _handle_run_restarted(self, ev: protocol.Event) -> None:
        from ddpstudio.core.launch.restart import restart_words

        self.log_received.emit(None, "warning", restart_words(ev))
        self.metrics_received.emit(ev)  # the plots drop the steps the restart trains again

    def _handle_batch_balanced(self, ev: protocol.Event) -> None:
        self.log_received.emit(None, "studio", str(ev.get("reason", "")))
        self.batch_balanced.emit(ev)

    def _handle_rank_stuck(self, ev: protocol.Event) -> None:
        from ddpstudio.core.launch.hangwatch import stuck_words

        self.log_received.emit(ev.rank, "warning", stuck_words(ev, "Stop"))
        self.rank_stuck.emit(ev)

    def _handle_rank_exited(self, ev: protocol.Event) -> None:
        stopping = self.state is RunState.STOPPING
        self.log_received.emit(ev.rank, "studio",
                               f"exited: {rank_exit_text(ev.get('exit_code'), self.platform, stopping)}")

    def _handle_run_finished(self, ev: protocol.Event) -> None:
        self._finished_event = ev

    # -- the end -------------------------------------------------------------
    @Slot(QProcess.ProcessError)
    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and self.process is not None:
            self._stderr.append(f"could not start the launcher: {self.process.errorString()}")
            self._finish(None)

    @Slot(int, QProcess.ExitStatus)
    def _on_exit(self, code: int, _status: QProcess.ExitStatus) -> None:
        self._read_stdout()
        self._read_stderr()
        self._finish(code)

    @Slot()
    def _check_alive(self) -> None:
        """Belt and braces: a launcher that is gone without a finished signal still ends the run."""
        if self.process is not None and self.active and self.process.state() == QProcess.ProcessState.NotRunning:
            self._finish(self.process.exitCode())

    def _finish(self, code: int | None) -> None:
        if not self.active:
            return
        self._poll.stop()
        self._deadline.stop()
        self.exit_code = code
        ev = self._finished_event or self._made_up_finish(code)
        if self._stop_asked and code == EXIT_REFUSED:  # stopped before it started (a host waiting for nodes)
            ev = protocol.make_event(protocol.RUN_FINISHED, state=protocol.STOPPED, root_cause=None,
                                     summary=ev.get("summary"), run_dir=None)
        state = RunState(ev.get("state")) if ev.get("state") in protocol.EXIT_CODES else RunState.FAILED
        self.pids = {}
        self.ranks_changed.emit({})
        self._set_state(state)
        self.run_finished.emit(ev)

    def _made_up_finish(self, code: int | None) -> protocol.Event:
        """The launcher died without its last word (killed, crashed, failed to start)."""
        if self._stop_asked:
            return protocol.make_event(protocol.RUN_FINISHED, state=protocol.STOPPED, root_cause=None, summary=None,
                                       run_dir=self.run_dir or None)
        refused = refusal(self._stderr) if code == EXIT_REFUSED else ""
        if refused:  # 'ddpstudio host|join' said no before starting anything: its own words are the message
            return protocol.make_event(protocol.RUN_FINISHED, state=protocol.FAILED, summary=refused,
                                       root_cause={"rank": -1, "exit_code": code, "message": refused,
                                                   "traceback_tail": []}, run_dir=None)
        message = next((ln for ln in reversed(self._stderr) if ln.strip()), "") or "no error message"
        summary = f"the launcher ended without reporting a result ({describe_exit(code, self.platform)}): {message}"
        return protocol.make_event(
            protocol.RUN_FINISHED, state=protocol.FAILED, summary=summary,
            root_cause={"rank": -1, "exit_code": code, "message": message, "traceback_tail": list(self._stderr)},
            run_dir=self.run_dir or None)

    def _set_state(self, state: RunState) -> None:
        if state is not self.state:
            self.state = state
            self.run_state_changed.emit(state.value)


def refusal(stderr_lines) -> str:
    """The ``ddpstudio: error:`` lines a refusing command printed, as one message ('' when none)."""
    found = [ln.split(ERROR_PREFIX, 1)[1].strip() for ln in stderr_lines if ERROR_PREFIX in ln]
    return "; ".join(dict.fromkeys(m for m in found if m))


def launcher_python(executable: str, platform: Platform, exists=os.path.exists) -> str:
    """The launcher's interpreter: python.exe even when the window runs under pythonw.exe.

    Under pythonw the launcher would have no console, and CPython 3.11's ``os.kill`` can then
    raise SystemError instead of OSError (cpython #112190). Its console stays hidden (see ``_detach``).
    """
    return console_python(executable, platform, exists)
