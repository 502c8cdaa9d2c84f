"""The DDP Studio main window: puts the panels together and routes the controllers' signals.

Left: the machine and the run setup, with Launch / Stop / Clean up. Right:
the error panel, the progress line and tabs for the live plots, the log,
past runs and the scaling benchmark. One render timer pulls from the buffers and redraws what changed.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, QUrl, Signal, Slot
from PySide6.QtGui import QCloseEvent, QDesktopServices
from PySide6.QtWidgets import QMainWindow, QSplitter

from ddpstudio.core import paths
from ddpstudio.core.gpu import GpuSource, Inventory, Snapshot
from ddpstudio.core.platform import Platform, current
from ddpstudio.gui.bench_controller import BenchController
from ddpstudio.gui.advisor import LoadAdvisor
from ddpstudio.gui.bench_view import BenchView
from ddpstudio.gui.copy_as import CopyAs
from ddpstudio.gui.dialogs import Dialogs
from ddpstudio.gui.gui_thread_gc import collect_on_gui_thread
from ddpstudio.gui.launch_flow import LaunchFlow
from ddpstudio.gui.icon import app_icon
from ddpstudio.gui.load_history import LoadHistory
from ddpstudio.gui.machine_panel import MachinePanel
from ddpstudio.gui.monitor import MachineMonitor
from ddpstudio.gui.node_flow import NodeFlow
from ddpstudio.gui.preflight import Preflight
from ddpstudio.gui.run_controller import RunController
from ddpstudio.gui.past_runs import PastRuns
from ddpstudio.gui.progress_view import finished_text
from ddpstudio.gui.run_metrics import RunMetrics
from ddpstudio.gui.run_view import TABS, RunView
from ddpstudio.gui.settings import Settings
from ddpstudio.gui.setup_check import SetupCheck
from ddpstudio.gui.setup_column import SetupColumn
from ddpstudio.gui.setup_form import SetupForm
from ddpstudio.gui.tooltips import ReadableTips
from ddpstudio.gui.window_actions import WindowActions, about
from ddpstudio.gui.window_explain import WindowExplainer
from ddpstudio.gui.window_settings import restore_window, save_window
from ddpstudio.gui.workers import Workers

RENDER_MS = 50  # 20 ticks a second while something changes (one plot redrawn per tick); stops when idle


class MainWindow(QMainWindow):
    launch_blocked = Signal(object)  # Preflight: Launch was clicked but the checks said no
    past_run_shown = Signal(object)  # LoadedRun

    def __init__(self, dialogs=None, gpu_source: GpuSource | None = None, platform: Platform | None = None,
                 settings: Settings | None = None) -> None:
        super().__init__()
        collect_on_gui_thread()  # before any worker thread runs: see gui_thread_gc
        self.setWindowTitle("DDP Studio")
        self.setWindowIcon(app_icon())
        self.platform = platform or current()
        self.dialogs = dialogs or Dialogs(self)
        self.settings = settings or Settings()
        self.workers = Workers(self)
        self.monitor = MachineMonitor(self.workers, gpu_source, parent=self)
        self.controller = RunController(self.platform, self)
        self.bench = BenchController(self.platform, self)
        self.check = SetupCheck(self.workers, self.platform, self)
        self.history = LoadHistory()
        self.advisor = LoadAdvisor(self.history)
        self.past_runs = PastRuns(self)
        self.launch_flow = LaunchFlow(self)
        self.metrics: RunMetrics | None = None  # the live (or last) run's
        self.cleanup_dialog = None
        self._close_when_idle = False

        self._build()
        self._connect()
        self.node_flow = NodeFlow(self)  # Run ▸ Host / Join: after _connect, its slots speak last
        restore_window(self)
        self.tips = ReadableTips(self)
        self.tips.watch(self)
        self.render_timer = QTimer(self)
        self.render_timer.setInterval(RENDER_MS)
        self.render_timer.timeout.connect(self._render)
        self.monitor.start()
        self.check.warm_up()
        self.runs_panel.refresh()
        self.check.request(self.form.state())
        self._update_actions()

    # -- building ------------------------------------------------------------
    def _build(self) -> None:
        self.actions = a = WindowActions(self, launch=self.launch, stop=self.stop, cleanup=self.open_cleanup,
                                     open_log_folder=lambda: self._open_folder(str(paths.log_dir())),
                                     about=lambda: about(self.dialogs))
        self.launch_action, self.stop_action, self.cleanup_action = a.launch, a.stop, a.cleanup
        self.machine_panel = MachinePanel()
        self.form = SetupForm(self.dialogs, platform=self.platform)
        self.launch_button = WindowActions.button(self.launch_action)
        self.stop_button = WindowActions.button(self.stop_action)
        self.cleanup_button = WindowActions.button(self.cleanup_action)
        left = SetupColumn(self.machine_panel, self.form, [self.launch_button, self.stop_button, self.cleanup_button])

        self.bench_view = BenchView(self.bench, self.workers, self.dialogs, lambda: self.form.state().to_request(self.platform))
        self.run_view = RunView(self.workers, self.bench_view, dialogs=self.dialogs)
        # The parts tests and the rest of the window talk to directly.
        v = self.run_view
        self.error_panel, self.progress, self.plots = v.error_panel, v.progress, v.plots
        self.log_view, self.runs_panel, self.tabs = v.log_view, v.runs_panel, v.tabs
        self.actions.add_tab_shortcuts(TABS, self.tabs.setCurrentIndex)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.run_view)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([480, 840])
        self.setCentralWidget(self.splitter)
        self.statusBar().showMessage("Looking at this machine…")
        self.explainer = WindowExplainer(self)  # Launch's reasons, the Log's story, presets, Copy as command
        self.copy_as = CopyAs(self)  # Run ▸ Copy as ▸ a cluster engine's job, from the form or a past run

    def _connect(self) -> None:
        self.monitor.inventory_detected.connect(self._on_inventory)
        self.monitor.inventory_failed.connect(self._on_inventory_failed)
        self.monitor.snapshot_taken.connect(self._on_snapshot)
        self.form.changed.connect(lambda: self.check.request(self.form.state()))
        self.machine_panel.gpus_chosen.connect(self.form.set_gpus)
        self.form.changed.connect(self._show_chosen_gpus)
        self.check.checked.connect(self._on_checked)
        self.check.pending_changed.connect(self._update_actions)
        c = self.controller
        c.run_state_changed.connect(self._on_run_state)
        c.run_started.connect(self._feed)
        c.metrics_received.connect(self._feed)
        c.problem_reported.connect(self._on_problem)
        c.rank_stuck.connect(self._on_stuck)
        c.batch_balanced.connect(lambda ev: self.machine_panel.add_reason(str(ev.get("reason", ""))))
        c.ranks_changed.connect(self._on_ranks)
        c.log_received.connect(self.log_view.append)
        c.log_received.connect(self._kick_render)
        c.run_finished.connect(self._on_run_finished)
        self.error_panel.cleanup_requested.connect(self.open_cleanup)
        self.error_panel.stop_requested.connect(self.stop)
        self.error_panel.open_folder_requested.connect(self._open_folder)
        self.runs_panel.run_selected.connect(self.past_runs.show)
        self.runs_panel.run_again_requested.connect(self.past_runs.run_again)
        self.past_runs.shown.connect(self.past_run_shown)
        self.launch_flow.blocked.connect(self.launch_blocked)
        self.runs_panel.open_folder_requested.connect(self._open_folder)
        self.form.changed.connect(lambda: self.bench_view.set_workload(self.form.state().workload))
        self.bench.active_changed.connect(self._update_actions)
        self.bench.active_changed.connect(self._on_bench_active)
        self.bench.bench_finished.connect(self._on_bench_finished)

    # -- settings ----------------------------------------------------------------
    def save_settings(self) -> None:
        save_window(self)

    # -- machine -----------------------------------------------------------------
    @Slot(object)
    def _on_inventory(self, inventory: Inventory) -> None:
        self.machine_panel.set_inventory(inventory)
        self._show_chosen_gpus()
        self.tips.watch(self.machine_panel)  # its cards are new
        biggest = max((gpu.total_memory_mb for gpu in inventory.gpus), default=0) / 1024
        self.plots.show_load(self.history, inventory.cpu_mode, biggest or None)
        self.form.set_world_hint(inventory.gpu_count if not inventory.cpu_mode else 2)
        self.bench_view.set_machine(inventory)
        self.check.set_machine(inventory)
        where = "CPU mode (Gloo)" if inventory.cpu_mode else f"{inventory.gpu_count} GPU(s)"
        self.statusBar().showMessage(f"{where} · torch {inventory.torch_version}", 8000)

    @Slot()
    def _show_chosen_gpus(self) -> None:
        """The form's GPUs (a preset, "run again") ticked on the cards; only their load plotted (from the next
        snapshot's redraw, half a second at most)."""
        self.machine_panel.show_chosen(self.form.gpus)
        self.history.choose(self.form.gpus)

    @Slot(str)
    def _on_inventory_failed(self, message: str) -> None:
        self.machine_panel.set_inventory_failed(message)

    @Slot(object)
    def _on_snapshot(self, snapshot: Snapshot) -> None:
        self.history.add(snapshot)
        self.machine_panel.update_snapshot(snapshot, self.history.rank_load())
        self._kick_render()

    # -- setup ---------------------------------------------------------------------
    @Slot(object)
    def _on_checked(self, checked: Preflight) -> None:
        self.form.show_problems(checked.problems)
        self.machine_panel.set_plan(checked.plan)
        if checked.plan is not None:
            self.form.set_world_hint(checked.plan.world_size)
        self._update_actions()

    def _update_actions(self, *_args) -> None:
        training = self.controller.active or self.preparing
        busy = training or self.bench.active  # one at a time: a benchmark is several runs
        self.launch_action.setEnabled(not busy and self.check.ok)
        self.bench_view.set_allowed(not training and self.check.ok)
        self.stop_action.setEnabled(self.controller.active and self.controller.state_name != "stopping")
        self.form.setEnabled(not busy)
        self.machine_panel.set_choice_enabled(not busy)

    # -- launch / stop -------------------------------------------------------------
    def launch(self) -> None:
        if self.launch_action.isEnabled():
            self.launch_flow.launch()

    @property
    def preparing(self) -> bool:
        return self.launch_flow.preparing

    def stop(self) -> None:
        self.controller.stop()
        self._update_actions()

    # -- the run's signals -----------------------------------------------------------
    @Slot(str)
    def _on_run_state(self, state: str) -> None:
        self.progress.set_state(state)
        self._update_actions()
        self._kick_render()

    @Slot(object)
    def _feed(self, event) -> None:
        if self.metrics is not None:
            self.metrics.feed(event)
        self._kick_render()

    @Slot(object)
    def _on_problem(self, event) -> None:
        self._feed(event)
        if event.type == "warning":
            self.statusBar().showMessage(f"Warning: {event.get('message')}", 15000)

    @Slot(object)
    def _on_stuck(self, event) -> None:
        """A stuck rank: said above the plots with Stop (unless the launcher ends the run itself)."""
        self.statusBar().showMessage(f"Stuck: {event.get('message')}", 15000)
        if event.get("action") != "stop":
            self.error_panel.show_stuck(str(event.get("message")), self.controller.run_dir)

    @Slot(object)
    def _on_ranks(self, pids: dict) -> None:
        self.monitor.watch(tuple(pids.values()))
        if pids:
            self.history.watch(pids)

    @Slot(object)
    def _on_run_finished(self, event) -> None:
        self._feed(event)
        state = event.get("state")
        if self.error_panel.kind == "stuck":  # the run is over: nothing is stuck, nothing to stop
            self.error_panel.clear()
        self.run_view.show_outcome(dict(event.data), self.metrics)
        self.statusBar().showMessage(finished_text(state, event.get("duration_s")), 15000)
        self.runs_panel.refresh()
        if self._close_when_idle:
            QTimer.singleShot(0, self.close)

    # -- drawing -------------------------------------------------------------------------
    @Slot()
    def _kick_render(self, *_args) -> None:
        if not self.render_timer.isActive():
            self.render_timer.start()

    @Slot()
    def _render(self) -> None:
        changed = self.run_view.render()
        if self.controller.active:
            self._advise()
        elif not changed:
            self.render_timer.stop()

    def _advise(self) -> None:
        hint = self.advisor.advice(self.metrics, gpu_mode=self.machine_panel.cpu_mode is False)
        if hint is not None:
            self.error_panel.show_advice(hint)

    # -- benchmark -------------------------------------------------------------------------
    @Slot(bool)
    def _on_bench_active(self, active: bool) -> None:
        if active:  # what the window showed was about the last run, not this benchmark
            self.metrics = None
            self.statusBar().clearMessage()
            self.run_view.begin_bench()

    @Slot(object)
    def _on_bench_finished(self, result) -> None:
        if result is not None:
            self.statusBar().showMessage("Benchmark stopped" if result.stopped else "Benchmark done", 15000)
            self.runs_panel.refresh()
        if self._close_when_idle:
            QTimer.singleShot(0, self.close)

    # -- clean up ---------------------------------------------------------------------------
    def open_cleanup(self) -> None:
        from ddpstudio.gui.cleanup_dialog import CleanupDialog  # imports the hygiene layer (psutil) on demand

        if self.cleanup_dialog is None:
            self.cleanup_dialog = CleanupDialog(self.workers, self.dialogs, self)
            self.cleanup_dialog.clean_finished.connect(self._on_cleaned)
        self.cleanup_dialog.open()
        self.cleanup_dialog.start_scan()

    @Slot(object)
    def _on_cleaned(self, report) -> None:
        self.log_view.append(None, "studio", f"clean up: {report.summary()}")
        self.statusBar().showMessage(report.summary(), 15000)
        self._kick_render()

    # -- the rest ----------------------------------------------------------------------------
    @Slot(str)
    def _open_folder(self, path: str) -> None:
        if path:
            QDesktopServices.openUrl(QUrl.fromLocalFile(path))

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.controller.active or self.preparing or self.bench.active:
            event.ignore()
            if self._close_when_idle:
                return
            what = "benchmark" if self.bench.active else "run"
            if self.dialogs.ask_yes_no(f"Stop the {what}?", f"A {what} is in progress. Stop it and close DDP Studio?",
                                       yes="Stop and close", no="Keep running"):
                self._close_when_idle = True
                self.statusBar().showMessage(f"Stopping the {what} before closing…")
                self.controller.stop()
                self.bench.stop()  # the window closes on bench_finished, once its launcher has ended
                self._update_actions()
            return
        self.save_settings()
        self.render_timer.stop()
        self.monitor.stop()
        if self.cleanup_dialog is not None:
            self.cleanup_dialog.close()
        event.accept()
