"""The right side of the window: what one run looks like, live or reopened.

The error panel, the progress line, a "past run" banner while a reopened run
is shown, and five tabs (live plots, the merged log, past runs, the benchmark
view the window passes in, and the comparison of several runs).
:meth:`RunView.render` is what the window's render timer calls; it pulls
from the buffers and redraws what changed.
"""

from __future__ import annotations

from PySide6.QtCore import QTimer, Slot
from PySide6.QtWidgets import QLabel, QTabWidget, QVBoxLayout, QWidget

from ddpstudio.core import protocol
from ddpstudio.core.launch.outcome import last_output_lines
from ddpstudio.core.metrics.catalog import RUNNING, UNKNOWN, list_entries, previous_of
from ddpstudio.gui.compare_view import CompareView
from ddpstudio.gui.dialogs import Dialogs
from ddpstudio.gui.error_panel import ErrorPanel
from ddpstudio.core.hints import hints_for, script_python
from ddpstudio.gui.log_view import LogView
from ddpstudio.gui.plots import LivePlots
from ddpstudio.gui.progress_view import ProgressView
from ddpstudio.gui.run_history import LoadedRun
from ddpstudio.gui.run_metrics import RunMetrics
from ddpstudio.gui.runs_actions import RunsActions
from ddpstudio.gui.runs_panel import RunsPanel
from ddpstudio.gui.workers import Workers

TABS = ("Live plots", "Log", "Past runs", "Benchmark", "Compare")
LIST_AFTER_START_MS = 5000
PAST_RUN_STYLE = "QLabel { background: #FFF4CE; color: #3B2F00; padding: 4px 8px; border-radius: 3px; }"


class RunView(QWidget):
    def __init__(self, workers: Workers, bench: QWidget, parent: QWidget | None = None, dialogs=None) -> None:
        super().__init__(parent)
        self.error_panel = ErrorPanel()
        self.progress = ProgressView()
        self.past_banner = QLabel()
        self.past_banner.setStyleSheet(PAST_RUN_STYLE)
        self.past_banner.setWordWrap(True)
        self.past_banner.hide()
        self.plots = LivePlots()
        self.log_view = LogView()
        self.runs_panel = RunsPanel(workers)
        self.compare_view = CompareView(workers)
        self.tabs = QTabWidget()
        self.bench_view = bench
        widgets = (self.plots, self.log_view, self.runs_panel, bench, self.compare_view)
        for widget, name in zip(widgets, ("Live", "Log", "Runs", "Benchmark", "Compare")):
            self.tabs.addTab(widget, name)
        # The window's Dialogs seam; the benchmark view already holds it.
        dialogs = dialogs or getattr(bench, "dialogs", None) or Dialogs(self)
        self.runs_actions = RunsActions(workers, dialogs, self.runs_panel.refresh, self)
        self.runs_panel.compare_requested.connect(self.compare)
        self.progress.compare_requested.connect(self.compare_with)
        self.workers, self._compare_dir = workers, ""
        self.runs_panel.delete_requested.connect(self.runs_actions.delete)
        self.runs_panel.export_requested.connect(self.runs_actions.export)
        self._live_load: tuple | None = None  # the window's live load history while a past run is shown
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.error_panel)
        layout.addWidget(self.progress)
        layout.addWidget(self.past_banner)
        layout.addWidget(self.tabs, 1)

    def compare(self, run_dirs: list[str]) -> None:
        """Overlay these runs on the Compare tab (the first one is the baseline)."""
        if run_dirs:
            self.compare_view.compare(run_dirs)
            self.tabs.setCurrentWidget(self.compare_view)

    def compare_with(self, run_dir: str) -> None:
        """The summary card's "Compare with…": this run against the previous run of the same model,
        both selected in the Runs tab, where Ctrl-clicking others picks more."""
        self._compare_dir = run_dir
        self.workers.submit(list_entries, self._compare_listed)  # a bound slot: delivered on the GUI thread

    @Slot(object)
    def _compare_listed(self, entries) -> None:
        run_dir = self._compare_dir
        previous = previous_of(entries, run_dir)
        dirs = [previous.run_dir, run_dir] if previous is not None else [run_dir]
        self.runs_panel.show_runs(entries)
        self.runs_panel.select_dirs(dirs)
        self.compare(dirs)

    def show_metrics(self, metrics: RunMetrics) -> None:
        self.plots.show_run(metrics)
        self.progress.show_metrics(metrics)

    def begin_run(self, metrics: RunMetrics, notes: list[str]) -> None:
        """A new live run: fresh curves and log (with what was done before it started)."""
        self._leave_past()
        # Listed once its launcher has registered it, so it can be compared while it trains.
        QTimer.singleShot(LIST_AFTER_START_MS, self.runs_panel, self.runs_panel.refresh)
        self.show_metrics(metrics)
        self.error_panel.clear()
        self.log_view.clear()
        for note in notes:
            self.log_view.append(None, "studio", note)
        self.tabs.setCurrentWidget(self.plots)

    def begin_bench(self) -> None:
        """A benchmark starts: the header, the plots and the error panel no longer tell the last run
        (issue 24); its runs are told in the Benchmark tab, which comes to the front."""
        self._leave_past()
        self.show_metrics(None)
        self.error_panel.clear()
        self.tabs.setCurrentWidget(self.bench_view)

    def show_failure(self, title: str, final: dict, metrics: RunMetrics | None) -> None:
        """The root cause of a run_finished event, with the hints its words call for."""
        cause = final.get("root_cause") or {}
        summary = final.get("summary") or "no error message"
        tail = cause.get("traceback_tail") or []
        errors = [str(e.get("message", "")) for e in (metrics.errors if metrics else [])]
        hints = hints_for(summary, cause.get("message", ""), *tail, *errors,
                          python=script_python(final.get("run_dir")))
        self.error_panel.show_failure(title, summary, tail, hints, final.get("run_dir") or "")

    def show_outcome(self, final: dict, metrics: RunMetrics | None, title: str = "The run failed") -> bool:
        """The error panel for a run that did not end well: failed, or exited 0 without training
        (issue 11: why, and the ranks' last output lines). Returns whether the panel shows."""
        state = final.get("state")
        if state == protocol.FAILED:
            self.show_failure(title, final, metrics)
        elif state in (protocol.NOTHING_TRAINED, protocol.NOT_DISTRIBUTED):
            said = protocol.outcome_text(state)
            self.error_panel.show_failure(f"{said[0].upper()}{said[1:]}", final.get("summary") or said,
                                          last_output_lines(final.get("last_output")), [],
                                          final.get("run_dir") or "", details_title="Last output")
        else:
            return False
        return True

    def show_past(self, run: LoadedRun) -> None:
        """A finished run reopened from its folder: its curves (load included), log, state and root cause."""
        self.show_metrics(run.metrics)
        if run.load is not None:
            if self._live_load is None and self.plots.history is not None:
                self._live_load = (self.plots.history, self.plots.cpu_mode)
            self._show_load(run.load, run.load.cpu_mode)
        s = run.summary
        self.past_banner.setText(f"Past run {s.run_id} ({s.started_text}, {protocol.outcome_text(s.state)}): the "
                                 f"plots show what it "
                                 f"measured, not this machine now. Launch to go live again.")
        self.past_banner.show()
        # A run still training has no end state to show yet; one whose launcher was killed says so.
        self.progress.set_state(s.state if s.state not in (RUNNING, UNKNOWN) else "idle")
        self.log_view.clear()
        self.log_view.extend(run.logs)
        final = run.metrics.final or {}
        if not self.show_outcome(final, run.metrics, f"Run {run.summary.run_id} failed"):
            self.error_panel.clear()

    def _leave_past(self) -> None:
        """Back to live: the banner goes, and the load plots follow the machine again."""
        self.past_banner.hide()
        if self._live_load is not None:
            history, cpu_mode = self._live_load
            self._live_load = None
            if cpu_mode is not None:
                self._show_load(history, cpu_mode)

    def _show_load(self, history, cpu_mode: bool) -> None:
        # Fresh curve items: the other history's series may carry the same version numbers.
        self.plots.load.clear()
        self.plots.memory.clear()
        self.plots.show_load(history, cpu_mode)

    def render(self) -> bool:
        """Redraw what changed since the last call; returns whether anything did."""
        changed = self.plots.refresh()
        changed |= self.progress.refresh()
        changed |= self.log_view.flush()
        return changed

