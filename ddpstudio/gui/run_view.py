"""The right side of the window: what one run looks like, live or reopened.

The error panel, the progress line and four tabs (live plots, the merged
log, past runs, and the benchmark view the window passes in).
:meth:`RunView.render` is what the window's render timer calls; it pulls
from the buffers and redraws what changed.
"""

from __future__ import annotations

from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from ddpstudio.gui.error_panel import ErrorPanel
from ddpstudio.gui.hints import hints_for
from ddpstudio.gui.log_view import LogView
from ddpstudio.gui.plots import LivePlots
from ddpstudio.gui.progress_view import ProgressView
from ddpstudio.gui.run_history import LoadedRun
from ddpstudio.gui.run_metrics import RunMetrics
from ddpstudio.gui.runs_panel import RunsPanel
from ddpstudio.gui.workers import Workers

TABS = ("Live plots", "Log", "Past runs", "Benchmark")


class RunView(QWidget):
    def __init__(self, workers: Workers, bench: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.error_panel = ErrorPanel()
        self.progress = ProgressView()
        self.plots = LivePlots()
        self.log_view = LogView()
        self.runs_panel = RunsPanel(workers)
        self.tabs = QTabWidget()
        self.bench_view = bench
        widgets = (self.plots, self.log_view, self.runs_panel, bench)
        for widget, name in zip(widgets, ("Live", "Log", "Runs", "Benchmark")):
            self.tabs.addTab(widget, name)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.error_panel)
        layout.addWidget(self.progress)
        layout.addWidget(self.tabs, 1)

    def show_metrics(self, metrics: RunMetrics) -> None:
        self.plots.show_run(metrics)
        self.progress.show_metrics(metrics)

    def begin_run(self, metrics: RunMetrics, notes: list[str]) -> None:
        """A new live run: fresh curves and log (with what was done before it started)."""
        self.show_metrics(metrics)
        self.error_panel.clear()
        self.log_view.clear()
        for note in notes:
            self.log_view.append(None, "studio", note)
        self.tabs.setCurrentWidget(self.plots)

    def show_failure(self, title: str, final: dict, metrics: RunMetrics | None) -> None:
        """The root cause of a run_finished event, with the hints its words call for."""
        cause = final.get("root_cause") or {}
        summary = final.get("summary") or "no error message"
        tail = cause.get("traceback_tail") or []
        errors = [str(e.get("message", "")) for e in (metrics.errors if metrics else [])]
        hints = hints_for(summary, cause.get("message", ""), *tail, *errors)
        self.error_panel.show_failure(title, summary, tail, hints, final.get("run_dir") or "")

    def show_past(self, run: LoadedRun) -> None:
        """A finished run reopened from its folder: its curves, log, state and root cause."""
        self.show_metrics(run.metrics)
        self.progress.set_state(run.summary.state if run.summary.state != "unknown" else "idle")
        self.log_view.clear()
        self.log_view.extend(run.logs)
        final = run.metrics.final or {}
        if final.get("state") == "failed":
            self.show_failure(f"Run {run.summary.run_id} failed", final, run.metrics)
        else:
            self.error_panel.clear()

    def render(self) -> bool:
        """Redraw what changed since the last call; returns whether anything did."""
        changed = self.plots.refresh()
        changed |= self.progress.refresh()
        changed |= self.log_view.flush()
        return changed
