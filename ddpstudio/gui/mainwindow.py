"""The DDP Studio main window: puts the panels together and routes the controllers' signals.

Left: the machine and the run setup, with Launch / Stop / Clean up. Right:
the error panel, the progress line and tabs for the live plots, the log,
past runs and the scaling benchmark. One render timer pulls from the buffers and redraws what changed.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, QUrl, Signal, Slot
from PySide6.QtGui import QCloseEvent, QDesktopServices
from PySide6.QtWidgets import QMainWindow, QSplitter

from ddpstudio import __version__
from ddpstudio.cli.progress import format_eta
from ddpstudio.core import paths
from ddpstudio.core.gpu import GpuSource, Inventory, Snapshot
from ddpstudio.core.platform import Platform, current
from ddpstudio.gui.bench_controller import BenchController
from ddpstudio.gui.bench_view import BenchView
from ddpstudio.gui.dialogs import Dialogs
from ddpstudio.gui.hints import hints_for, low_load_hint
from ddpstudio.gui.icon import app_icon
from ddpstudio.gui.load_history import LOW_LOAD_WINDOW_S, LoadHistory
from ddpstudio.gui.machine_panel import MachinePanel
from ddpstudio.gui.monitor import MachineMonitor
from ddpstudio.gui.preflight import LaunchReady, Preflight, prepare_launch
from ddpstudio.gui.run_controller import RunController
from ddpstudio.gui.run_history import LoadedRun, load_run
from ddpstudio.gui.run_metrics import RunMetrics
from ddpstudio.gui.run_view import TABS, RunView
from ddpstudio.gui.settings import Settings
from ddpstudio.gui.setup_check import SetupCheck
from ddpstudio.gui.setup_column import SetupColumn
from ddpstudio.gui.setup_form import SetupForm
from ddpstudio.gui.window_actions import WindowActions
from ddpstudio.gui.window_settings import restore_window, save_window
from ddpstudio.gui.workers import Workers

RENDER_MS = 50  # 20 ticks a second while something changes (one plot redrawn per tick); stops when idle
ADVICE_EVERY_S = 5.0


class MainWindow(QMainWindow):
    launch_blocked = Signal(object)  # Preflight: Launch was clicked but the checks said no
    past_run_shown = Signal(object)  # LoadedRun

    def __init__(self, dialogs=None, gpu_source: GpuSource | None = None, platform: Platform | None = None,
                 settings: Settings | None = None) -> None:
        super().__init__()
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
        self.metrics: RunMetrics | None = None  # the live (or last) run's
        self.cleanup_dialog = None
        self.preparing = False
        self._close_when_idle = False
        self._run_began = 0.0
        self._last_advice = 0.0

        self._build()
        self._connect()
        self._restore()
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
        self.actions = WindowActions(self, launch=self.launch, stop=self.stop, cleanup=self.open_cleanup,
                                     open_log_folder=lambda: self._open_folder(str(paths.log_dir())),
                                     about=self._about)
        self.launch_action, self.stop_action = self.actions.launch, self.actions.stop
        self.cleanup_action = self.actions.cleanup
        self.machine_panel = MachinePanel()
        self.form = SetupForm(self.dialogs)
        self.launch_button = WindowActions.button(self.launch_action)
        self.launch_button.setDefault(True)
        self.stop_button = WindowActions.button(self.stop_action)
        self.cleanup_button = WindowActions.button(self.cleanup_action)
        left = SetupColumn(self.machine_panel, self.form, [self.launch_button, self.stop_button, self.cleanup_button])

        self.bench_view = BenchView(self.bench, self.workers, self.dialogs, lambda: self.form.state().to_request())
        self.run_view = RunView(self.workers, self.bench_view)
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

    def _connect(self) -> None:
        self.monitor.inventory_detected.connect(self._on_inventory)
        self.monitor.inventory_failed.connect(self._on_inventory_failed)
        self.monitor.snapshot_taken.connect(self._on_snapshot)
        self.form.changed.connect(lambda: self.check.request(self.form.state()))
        self.check.checked.connect(self._on_checked)
        self.check.pending_changed.connect(self._update_actions)
        c = self.controller
        c.run_state_changed.connect(self._on_run_state)
        c.run_started.connect(self._feed)
        c.metrics_received.connect(self._feed)
        c.problem_reported.connect(self._on_problem)
        c.ranks_changed.connect(self._on_ranks)
        c.log_received.connect(self.log_view.append)
        c.log_received.connect(self._kick_render)
        c.run_finished.connect(self._on_run_finished)
        self.error_panel.cleanup_requested.connect(self.open_cleanup)
        self.error_panel.open_folder_requested.connect(self._open_folder)
        self.runs_panel.run_selected.connect(self._show_past_run)
        self.runs_panel.run_again_requested.connect(self._run_again)
        self.runs_panel.open_folder_requested.connect(self._open_folder)
        self.form.changed.connect(lambda: self.bench_view.set_workload(self.form.state().workload))
        self.bench.active_changed.connect(self._update_actions)
        self.bench.bench_finished.connect(self._on_bench_finished)

    # -- settings ----------------------------------------------------------------
    def _restore(self) -> None:
        restore_window(self)

    def save_settings(self) -> None:
        save_window(self)

    # -- machine -----------------------------------------------------------------
    @Slot(object)
    def _on_inventory(self, inventory: Inventory) -> None:
        self.machine_panel.set_inventory(inventory)
        biggest = max((gpu.total_memory_mb for gpu in inventory.gpus), default=0) / 1024
        self.plots.show_load(self.history, inventory.cpu_mode, biggest or None)
        self.form.set_world_hint(inventory.gpu_count if not inventory.cpu_mode else 2)
        self.bench_view.set_machine(inventory)
        self.check.set_machine(inventory)
        where = "CPU mode (Gloo)" if inventory.cpu_mode else f"{inventory.gpu_count} GPU(s)"
        self.statusBar().showMessage(f"{where} · torch {inventory.torch_version}", 8000)

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

    # -- launch / stop -------------------------------------------------------------
    def launch(self) -> None:
        if not self.launch_action.isEnabled():
            return
        state = self.form.state()
        self.settings.set("setup", state.to_dict())
        self.settings.save()
        self.preparing = True
        self.error_panel.clear()
        self.progress.set_state("preparing")
        self._update_actions()
        machine, platform = self.check.machine, self.platform
        self.workers.submit(lambda: prepare_launch(state, machine, platform), self._on_prepared,
                            self._on_prepare_failed)

    @Slot(object)
    def _on_prepared(self, ready: LaunchReady) -> None:
        self.preparing = False
        for note in ready.store_notes:
            self.log_view.append(None, "studio", note)
            self.statusBar().showMessage(note, 15000)
        if self._close_when_idle:
            self._update_actions()
            QTimer.singleShot(0, self.close)
            return
        if not ready.preflight.ok:
            problems = ready.preflight.problems
            self.form.show_problems(problems)
            text = "\n".join(p.message for p in problems)
            self.error_panel.show_failure("Launch blocked", text, hints=hints_for(text))
            self.progress.set_state("idle")
            self._update_actions()
            self.launch_blocked.emit(ready.preflight)
            return
        plan = ready.preflight.plan
        self.metrics = RunMetrics()
        self.run_view.begin_run(self.metrics, ready.store_notes)
        self._run_began = self._last_advice = time.monotonic()
        self.controller.start(plan)
        self._update_actions()

    @Slot(str)
    def _on_prepare_failed(self, text: str) -> None:
        self.preparing = False
        self.progress.set_state("idle")
        self.error_panel.show_failure("Could not launch", text.strip().splitlines()[-1], text.splitlines()[-15:])
        self._update_actions()

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
    def _on_ranks(self, pids: dict) -> None:
        self.monitor.watch(tuple(pids.values()))
        if pids:
            self.history.watch(pids)

    @Slot(object)
    def _on_run_finished(self, event) -> None:
        self._feed(event)
        state = event.get("state")
        if state == "failed":
            self.run_view.show_failure("The run failed", dict(event.data), self.metrics)
        duration = event.get("duration_s")
        took = ""
        if isinstance(duration, (int, float)):
            took = f" after {duration:.1f} s" if duration < 60 else f" after {format_eta(duration)}"
        self.statusBar().showMessage(f"Run {state}{took}", 15000)
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
        now = time.monotonic()
        if self.metrics is None or now - self._last_advice < ADVICE_EVERY_S or not self.metrics.step:
            return
        self._last_advice = now
        gpu_mode = self.machine_panel.cpu_mode is False
        util = self.history.mean_gpu_util() if gpu_mode and now - self._run_began > LOW_LOAD_WINDOW_S else None
        hint = low_load_hint(util, self.metrics.data_wait_fraction)
        if hint is not None:
            self.error_panel.show_advice(hint)

    # -- benchmark -------------------------------------------------------------------------
    @Slot(object)
    def _on_bench_finished(self, result) -> None:
        if result is not None:
            self.statusBar().showMessage("Benchmark stopped" if result.stopped else "Benchmark done", 15000)
            self.runs_panel.refresh()
        if self._close_when_idle:
            QTimer.singleShot(0, self.close)

    # -- past runs -------------------------------------------------------------------------
    @Slot(str)
    def _show_past_run(self, run_dir: str) -> None:
        self.workers.submit(lambda: load_run(run_dir), self._on_past_run_loaded)

    @Slot(object)
    def _on_past_run_loaded(self, run: LoadedRun) -> None:
        self.runs_panel.show_details(run)
        if self.controller.active or self.preparing:
            self.statusBar().showMessage("The live run keeps the plots while it runs", 8000)
            return
        self.metrics = run.metrics
        self.run_view.show_past(run)
        self._kick_render()
        self.past_run_shown.emit(run)

    @Slot(str)
    def _run_again(self, run_dir: str) -> None:
        self.workers.submit(lambda: load_run(run_dir), self._on_run_again_loaded)

    @Slot(object)
    def _on_run_again_loaded(self, run: LoadedRun) -> None:
        if self.controller.active or self.preparing:
            return
        self.form.set_state(run.setup)
        self.form.setFocus()
        self.statusBar().showMessage(f"The form holds the setup of run {run.summary.run_id}: check it and launch",
                                     10000)

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

    def _about(self) -> None:
        self.dialogs.info("About DDP Studio", f"DDP Studio {__version__}\nPoint-and-click PyTorch DDP training.\n"
                                              f"Runs are kept in {paths.runs_dir()}")

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
