"""Past runs, listed from their run folders; picking one reloads its curves, logs and setup.

Listing and loading read files (events.jsonl may be large), so both run on a
worker; the panel only shows what comes back.
"""

from __future__ import annotations

import json

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (QHBoxLayout, QHeaderView, QLabel, QPlainTextEdit, QPushButton, QSplitter,
                               QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from ddpstudio.cli.progress import format_eta
from ddpstudio.gui.run_history import LoadedRun, RunSummary, list_runs
from ddpstudio.gui.workers import Workers

COLUMNS = ("Started", "Result", "What", "Ranks", "Duration")


class RunsPanel(QWidget):
    run_selected = Signal(str)  # a run folder to show
    run_again_requested = Signal(str)
    open_folder_requested = Signal(str)
    runs_listed = Signal(int)

    def __init__(self, workers: Workers, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workers = workers
        self.runs: list[RunSummary] = []
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(COLUMNS)
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setAccessibleName("Past runs")
        self.tree.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.tree.itemSelectionChanged.connect(self._on_selection)
        self.tree.itemActivated.connect(lambda *_: self._emit_selected(self.run_again_requested))
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setPlaceholderText("Select a run to see its curves, logs and setup.")
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        self.again_button = QPushButton("Run a&gain")
        self.again_button.setToolTip("Fill the setup form with this run's setup")
        self.again_button.clicked.connect(lambda: self._emit_selected(self.run_again_requested))
        self.folder_button = QPushButton("Open folder")
        self.folder_button.clicked.connect(lambda: self._emit_selected(self.open_folder_requested))
        self.empty = QLabel("No runs yet. Launch one and it will be listed here.")
        buttons = QHBoxLayout()
        for button in (self.refresh_button, self.again_button, self.folder_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.tree)
        split.addWidget(self.details)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.addWidget(self.empty)
        layout.addWidget(split, 1)
        layout.addLayout(buttons)
        self._update_buttons()

    def refresh(self) -> None:
        self.workers.submit(list_runs, self._show_runs)

    @Slot(object)
    def _show_runs(self, runs: list[RunSummary]) -> None:
        selected = self.selected_dir()
        self.runs = runs
        self.tree.blockSignals(True)
        self.tree.clear()
        for run in runs:
            duration = format_eta(run.duration_s) if run.duration_s is not None else ""
            item = QTreeWidgetItem([run.started_text, run.state, run.what, str(run.world_size), duration])
            item.setData(0, Qt.ItemDataRole.UserRole, run.run_dir)
            item.setToolTip(0, run.run_id)
            self.tree.addTopLevelItem(item)
            if run.run_dir == selected:
                item.setSelected(True)
        self.tree.blockSignals(False)
        self.empty.setVisible(not runs)
        self._update_buttons()
        self.runs_listed.emit(len(runs))

    def selected_dir(self) -> str:
        items = self.tree.selectedItems()
        return items[0].data(0, Qt.ItemDataRole.UserRole) if items else ""

    def select(self, run_dir: str) -> None:
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item.data(0, Qt.ItemDataRole.UserRole) == run_dir:
                self.tree.setCurrentItem(item)
                return

    def _emit_selected(self, signal) -> None:
        run_dir = self.selected_dir()
        if run_dir:
            signal.emit(run_dir)

    def _on_selection(self) -> None:
        self._update_buttons()
        self._emit_selected(self.run_selected)

    def _update_buttons(self) -> None:
        chosen = bool(self.selected_dir())
        self.again_button.setEnabled(chosen)
        self.folder_button.setEnabled(chosen)

    def show_details(self, run: LoadedRun) -> None:
        plan, metrics = run.plan, run.metrics
        lines = [f"Run {plan.run_id}: {run.summary.state}", f"Folder: {plan.run_dir}",
                 f"{plan.world_size} ranks, {plan.backend} on {plan.device}, {plan.store} store ({plan.init_method})"]
        lines += [f"  - {reason}" for reason in plan.reasons]
        if metrics.final and metrics.final.get("summary"):
            lines.append(f"Root cause: {metrics.final['summary']}")
        lines.append(f"Steps: {metrics.step}" + (f" of {metrics.total_steps}" if metrics.total_steps else ""))
        lines += ["", "Setup:", json.dumps(run.setup.to_dict(), indent=2)]
        self.details.setPlainText("\n".join(lines))
