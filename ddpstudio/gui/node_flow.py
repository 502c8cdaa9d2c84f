"""Host and join multi-machine runs from the window (issue 13): the Run menu's two actions, their
dialogs, the panel above the plots, and ``ddpstudio host|join`` in the run controller's QProcess.

The run itself is an ordinary run for the rest of the window (the same controller, plots, log and
error panel); this adds only what is about the machines. A command that refuses (a bad option, the
host's verdict on this node, an unreachable host) prints ``ddpstudio: error:`` and exits 2: the
error panel shows that one message under "nothing was started".
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction

from ddpstudio.core import protocol
from ddpstudio.core.launch.endings import EXIT_REFUSED
from ddpstudio.core.nodes import joincode
from ddpstudio.core.hints import hints_for
from ddpstudio.gui.node_commands import HostRequest, host_command, join_command
from ddpstudio.gui.node_dialogs import HostDialog, JoinDialog
from ddpstudio.gui.node_panel import NodePanel
from ddpstudio.gui.run_metrics import RunMetrics

HOST, JOIN = "host", "join"
TITLES = {HOST: "Could not host the run: nothing was started",
          JOIN: "Could not join the run: nothing was started"}


class NodeFlow(QObject):
    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = w = window
        self.mode = ""  # HOST or JOIN while the controller's run is ours
        self.host_dialog: HostDialog | None = None
        self.join_dialog: JoinDialog | None = None
        self._starting = False
        self.panel = NodePanel()
        w.run_view.layout().insertWidget(2, self.panel)  # under the progress line, above the tabs
        self.host_action = QAction("&Host a multi-machine run…", w)
        self.host_action.triggered.connect(self.open_host)
        self.join_action = QAction("&Join a run…", w)
        self.join_action.triggered.connect(self.open_join)
        menu = w.actions.run_menu
        menu.addSeparator()
        menu.addAction(self.host_action)
        menu.addAction(self.join_action)
        c = w.controller
        c.join_code_received.connect(self._on_join_code)
        c.run_started.connect(self._on_run_started)
        c.node_joined.connect(self._on_node_joined)
        c.node_news.connect(self._on_node_news)
        c.run_state_changed.connect(self._on_state)
        c.run_finished.connect(self._on_finished)  # after the window's own slot: the last word on the panel
        w.bench.active_changed.connect(self.update_actions)
        w.past_run_shown.connect(self._on_past_run)
        w.check.pending_changed.connect(self.update_actions)
        self.update_actions()

    @property
    def busy(self) -> bool:
        w = self.window
        return w.controller.active or w.preparing or w.bench.active

    @Slot()
    def update_actions(self, *_args) -> None:
        self.host_action.setEnabled(not self.busy)
        self.join_action.setEnabled(not self.busy)

    # -- the dialogs ---------------------------------------------------------
    def open_host(self) -> HostDialog:
        s = self.window.form.state()
        what = f"{s.model} on {s.data} data" if not s.is_script else "your script"
        _drop(self.host_dialog)
        self.host_dialog = HostDialog(what, self.window)
        self.host_dialog.chosen.connect(self.host)
        self.host_dialog.open()
        return self.host_dialog

    def open_join(self) -> JoinDialog:
        _drop(self.join_dialog)
        self.join_dialog = JoinDialog(self.window)
        self.join_dialog.chosen.connect(self.join)
        self.join_dialog.open()
        return self.join_dialog

    # -- starting ------------------------------------------------------------
    @Slot(object)
    def host(self, request: HostRequest) -> None:
        """Host the setup form's run on ``request.nodes`` machines."""
        w = self.window
        state = w.form.state()
        w.settings.set("setup", state.to_dict())
        w.settings.save()
        self.panel.hide()
        self._start(HOST, host_command(state, request, w.platform), "", "hosting: planning the run",
                    state.working_folder() if state.is_script else None)

    @Slot(str, object)
    def join(self, text: str, code: joincode.JoinCode) -> None:
        """Join the run of a pasted code; the code reaches ``ddpstudio join -`` on its stdin only."""
        self.panel.show_join(code)
        clean = "".join(text.split())
        self._start(JOIN, join_command(self.window.platform), clean + "\n", f"joining {code.masked()}")

    def _start(self, mode: str, command: list[str], stdin_text: str, note: str, folder: str | None = None) -> None:
        w = self.window
        if self.busy:
            w.statusBar().showMessage("A run or benchmark is in progress: stop it first", 8000)
            return
        w.metrics = RunMetrics()
        w.run_view.begin_run(w.metrics, [note])
        w.advisor.begin()
        self.mode, self._starting = mode, True
        try:
            w.controller.start(None, command, stdin_text, folder)
        finally:
            self._starting = False
        w._update_actions()
        self.update_actions()

    # -- the run's signals -----------------------------------------------------
    @Slot(object)
    def _on_join_code(self, ev: protocol.Event) -> None:
        text = str(ev.get("code") or "")
        try:
            code = joincode.decode(text)
        except joincode.JoinCodeError as exc:  # our own host wrote it: this would be a bug, say so
            self.window.log_view.append(None, "studio", f"the host's join code cannot be read: {exc}")
            return
        self.panel.show_host(text, code, str(ev.get("adapter") or ""), str(ev.get("adapter_reason") or ""))
        self._show_reasons(ev)
        m = self.window.metrics
        if m is not None:  # the header says the host waits for the other machines, not "Starting the ranks…"
            m.machines = code.nodes
            m.version += 1
            self.window._kick_render()

    @Slot()
    def _on_node_joined(self) -> None:
        self.panel.node_joined()
        m = self.window.metrics
        if m is not None and self.mode == HOST:
            m.machines_in += 1
            m.version += 1
            self.window._kick_render()

    @Slot(object)
    def _on_node_news(self, ev: protocol.Event) -> None:
        if self.mode == HOST:
            self.panel.set_node(int(ev.get("node")), str(ev.get("node_label") or ""), str(ev.get("node_news")))

    @Slot(object)
    def _on_run_started(self, ev: protocol.Event) -> None:
        if self.mode:
            self._show_reasons(ev)

    def _show_reasons(self, ev: protocol.Event) -> None:
        """The machine panel tells the multi-machine run's decisions, not the form's one-machine plan."""
        reasons = ev.get("reasons")
        if isinstance(reasons, list):
            self.window.machine_panel.show_reasons([str(r) for r in reasons])

    @Slot(str)
    def _on_state(self, state: str) -> None:
        if state == "starting" and not self._starting:  # the window's own Launch: not a multi-machine run
            self.mode = ""
            self.panel.hide()
        if self.mode and self.panel.isVisible():
            self.panel.set_run_state(state)
        self.update_actions()

    @Slot(object)
    def _on_past_run(self, _run) -> None:
        if not self.window.controller.active:  # a reopened run: the panel told the last live one
            self.panel.hide()

    @Slot(object)
    def _on_finished(self, ev: protocol.Event) -> None:
        mode, self.mode = self.mode, ""
        if mode:
            latest = self.window.check.latest
            self.window.machine_panel.set_plan(latest.plan if latest is not None else None)
        if mode and self.window.controller.exit_code == EXIT_REFUSED and ev.get("state") == protocol.FAILED:
            summary = str(ev.get("summary") or "no error message")
            self.window.error_panel.show_failure(TITLES[mode], summary, hints=hints_for(summary))
            self.panel.state.setText("Nothing was started")
        self.update_actions()


def _drop(dialog) -> None:
    """An earlier dialog goes (one of each kind at a time)."""
    if dialog is not None:
        dialog.close()
        dialog.deleteLater()
