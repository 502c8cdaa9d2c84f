"""Past runs, listed from their run folders; picking one reloads its curves, logs and setup.

Several runs (Ctrl/Shift-click) can be compared or deleted; a run's context
menu exports it. Listing and loading read files (events.jsonl may be large),
so both run on a worker; the panel only shows what comes back.
"""

from __future__ import annotations

import json

import time

from PySide6.QtCore import QPoint, Qt, Signal, Slot
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QMenu, QPlainTextEdit,
                               QPushButton, QSplitter, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from ddpstudio.cli.progress import format_eta
from ddpstudio.cli.runs import format_size
from ddpstudio.core import protocol
from ddpstudio.core.metrics.catalog import RunEntry, list_entries
from ddpstudio.gui.run_history import LoadedRun
from ddpstudio.gui.workers import Workers

COLUMNS = ("Started", "Result", "Kind", "What", "Ranks", "Duration", "Final loss", "Samples/s", "Disk")


class RunsPanel(QWidget):
    run_selected = Signal(str)  # a run folder to show
    run_again_requested = Signal(str)
    open_folder_requested = Signal(str)
    runs_listed = Signal(int)
    compare_requested = Signal(list)  # run folders, in the order they were selected
    delete_requested = Signal(list)  # run folders
    export_requested = Signal(str, str)  # run folder, "csv" | "tensorboard"
    copy_as_requested = Signal(str, str)  # run folder, a cluster engine (core/jobs/engines.py ENGINES)

    def __init__(self, workers: Workers, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workers = workers
        self.runs: list[RunEntry] = []
        self.tree = QTreeWidget()
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._menu)
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
        self.compare_button = QPushButton("&Compare")
        self.compare_button.setToolTip("Overlay the selected runs' curves on one chart (Ctrl/Shift-click to "
                                       "select several; the first selected is the baseline)")
        self.compare_button.clicked.connect(lambda: self.compare_requested.emit(self.selected_dirs()))
        self.delete_button = QPushButton("Delete")
        self.delete_button.setToolTip("Delete the selected runs' folders and records (asks first)")
        self.delete_button.clicked.connect(lambda: self.delete_requested.emit(self.selected_dirs()))
        self.disk = QLabel()
        self.empty = QLabel("No runs yet. Launch one and it will be listed here.")
        buttons = QHBoxLayout()
        for button in (self.refresh_button, self.again_button, self.folder_button, self.compare_button,
                       self.delete_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.disk)
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
        self.workers.submit(list_entries, self.show_runs)

    @Slot(object)
    def show_runs(self, runs: list[RunEntry]) -> None:
        """List these runs (newest first), keeping the selection."""
        selected = set(self.selected_dirs())
        self.runs = runs
        self.tree.blockSignals(True)
        self.tree.clear()
        for run in runs:
            duration = format_eta(run.duration_s) if run.duration_s is not None else ""
            loss = f"{run.final_loss:.4f}" if run.final_loss is not None else ""
            rate = f"{run.mean_samples_per_s:.1f}" if run.mean_samples_per_s is not None else ""
            kind = "benchmark" if run.origin == "bench" else "training"
            item = QTreeWidgetItem([time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started)),
                                    protocol.outcome_text(run.state), kind,
                                    f"{run.what}, {run.machines_text}" if run.machines_text else run.what,
                                    str(run.world_size), duration, loss, rate,
                                    format_size(run.size_bytes)])
            item.setData(0, Qt.ItemDataRole.UserRole, run.run_dir)
            item.setToolTip(0, run.run_id)
            self.tree.addTopLevelItem(item)
            if run.run_dir in selected:
                item.setSelected(True)
        self.tree.blockSignals(False)
        self.empty.setVisible(not runs)
        self.disk.setText(f"{len(runs)} run(s), {format_size(sum(r.size_bytes for r in runs))} on disk")
        self._update_buttons()
        self.runs_listed.emit(len(runs))

    def selected_dir(self) -> str:
        """The run in focus: the current item when it is selected, else the first selected one."""
        current = self.tree.currentItem()
        if current is not None and current.isSelected():
            return current.data(0, Qt.ItemDataRole.UserRole)
        items = self.tree.selectedItems()
        return items[0].data(0, Qt.ItemDataRole.UserRole) if items else ""

    def selected_dirs(self) -> list[str]:
        """Every selected run, in the order they were selected (the first is a comparison's baseline)."""
        return [item.data(0, Qt.ItemDataRole.UserRole) for item in self.tree.selectedItems()]

    def select_dirs(self, run_dirs: list[str]) -> None:
        """Select these runs, in this order (what Ctrl-clicking them would do); one selection change."""
        items = {self.tree.topLevelItem(i).data(0, Qt.ItemDataRole.UserRole): self.tree.topLevelItem(i)
                 for i in range(self.tree.topLevelItemCount())}
        self.tree.blockSignals(True)
        self.tree.clearSelection()
        for run_dir in run_dirs:
            if run_dir in items:
                items[run_dir].setSelected(True)
        self.tree.blockSignals(False)
        self._on_selection()

    def _menu(self, pos: QPoint) -> None:
        item = self.tree.itemAt(pos)
        if item is None:
            return
        self.context_menu(item.data(0, Qt.ItemDataRole.UserRole)).popup(self.tree.viewport().mapToGlobal(pos))

    def context_menu(self, run_dir: str) -> QMenu:
        """The menu a right-click on ``run_dir`` opens."""
        from ddpstudio.core.jobs.engines import ENGINES, TITLES

        menu = QMenu(self)
        menu.addAction("Export as CSV…", lambda: self.export_requested.emit(run_dir, "csv"))
        menu.addAction("Export for TensorBoard…", lambda: self.export_requested.emit(run_dir, "tensorboard"))
        copy_as = menu.addMenu("Copy as")  # the run handed to a cluster's engine (Run ▸ Copy as does the form)
        for engine in ENGINES:
            copy_as.addAction(f"{TITLES[engine]}…",
                              lambda engine=engine: self.copy_as_requested.emit(run_dir, engine))
        menu.addSeparator()
        menu.addAction("Compare selected", lambda: self.compare_requested.emit(self.selected_dirs()))
        menu.addAction("Delete selected…", lambda: self.delete_requested.emit(self.selected_dirs()))
        return menu

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
        if len(self.tree.selectedItems()) == 1:  # several selected: a comparison, not one run to show
            self._emit_selected(self.run_selected)

    def _update_buttons(self) -> None:
        chosen = len(self.tree.selectedItems())
        self.again_button.setEnabled(chosen == 1)
        self.folder_button.setEnabled(chosen == 1)
        self.compare_button.setEnabled(chosen >= 1)
        self.delete_button.setEnabled(chosen >= 1)

    def show_details(self, run: LoadedRun) -> None:
        plan, metrics = run.plan, run.metrics
        lines = [f"Run {plan.run_id}: {protocol.outcome_text(run.summary.state)}", f"Folder: {plan.run_dir}",
                 f"{plan.world_size} ranks, {plan.backend} on {plan.device}, {plan.store} store ({plan.init_method})"]
        lines += [f"  - {reason}" for reason in plan.reasons]
        if metrics.final and metrics.final.get("summary"):
            lines.append(f"Root cause: {metrics.final['summary']}")
        lines.append(f"Steps: {metrics.step}" + (f" of {metrics.total_steps}" if metrics.total_steps else ""))
        lines += ["", "Setup:", json.dumps(run.setup.to_dict(), indent=2)]
        self.details.setPlainText("\n".join(lines))
