"""The Clean up dialog: scan for leftovers, show them, and after one confirmation clean and report.

Stale store files and our orphaned ranks are ticked; processes DDP Studio did
not start that hold a stale file are listed apart, by name and command line,
and unticked: they are stopped only if the user ticks them. Scan and clean
(psutil over every process) run on a worker.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QLabel, QProgressBar, QPushButton, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from ddpstudio.core.cleanup.hygiene import CleanReport, Findings, clean, scan
from ddpstudio.gui.cleanup_question import confirmation
from ddpstudio.gui.workers import Workers

STALE, ORPHANS, FOREIGN = "stale", "orphans", "foreign"
SECTIONS = {STALE: "Stale store files (left by killed runs)",
            ORPHANS: "Orphaned ranks of earlier runs",
            FOREIGN: "Programs DDP Studio did not start that hold a stale file open (stopped only if ticked)"}


class CleanupDialog(QDialog):
    scan_finished = Signal(object)  # Findings
    clean_finished = Signal(object)  # CleanReport

    def __init__(self, workers: Workers, dialogs, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Clean up leftovers")
        self.workers, self.dialogs = workers, dialogs
        self.findings: Findings | None = None
        self.report: CleanReport | None = None
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["What", "Why"])
        self.tree.setAccessibleName("Leftovers found")
        self.tree.setColumnWidth(0, 380)
        self.buttons = QDialogButtonBox()
        self.clean_button = self.buttons.addButton("&Clean up selected", QDialogButtonBox.ButtonRole.AcceptRole)
        self.rescan_button = self.buttons.addButton("&Scan again", QDialogButtonBox.ButtonRole.ActionRole)
        self.close_button: QPushButton = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.clean_button.clicked.connect(self.clean_selected)
        self.rescan_button.clicked.connect(self.start_scan)
        self.close_button.clicked.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.busy)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.buttons)
        self.resize(760, 420)

    # -- scan ------------------------------------------------------------------
    def start_scan(self) -> None:
        self._busy("Looking for stale store files and orphaned ranks…")
        self.tree.clear()
        self.workers.submit(scan, self._on_scanned, self._on_failed)

    @Slot(object)
    def _on_scanned(self, findings: Findings) -> None:
        self.findings = findings
        self.tree.clear()
        sections = {STALE: [(s.path, s.reason, s) for s in findings.stale_stores],
                    ORPHANS: [(p.describe(), p.cmdline, p) for p in findings.orphans],
                    FOREIGN: [(p.describe(), f"holds {p.path} open · {p.cmdline}", p) for p in findings.foreign]}
        for key, rows in sections.items():
            if not rows:
                continue
            head = QTreeWidgetItem([f"{SECTIONS[key]} ({len(rows)})"])
            head.setFirstColumnSpanned(True)
            head.setFlags(Qt.ItemFlag.ItemIsEnabled)
            self.tree.addTopLevelItem(head)
            for what, why, value in rows:
                item = QTreeWidgetItem([what, why])
                item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsSelectable)
                item.setCheckState(0, Qt.CheckState.Unchecked if key == FOREIGN else Qt.CheckState.Checked)
                item.setToolTip(1, why)
                item.setData(0, Qt.ItemDataRole.UserRole, (key, value))
                head.addChild(item)
            head.setExpanded(True)
        notes = []
        if findings.corrupt_records:
            notes.append(f"{len(findings.corrupt_records)} unreadable run record(s) will be set aside.")
        if findings.live_stores:
            notes.append(f"{len(findings.live_stores)} store(s) of live runs are in use and left alone.")
        if findings.empty:
            self._idle("Nothing to clean up: no stale store files and no orphaned ranks. " + " ".join(notes))
        else:
            self._idle("Found these leftovers. Untick what should stay, then click Clean up selected. "
                       + " ".join(notes))
        self.clean_button.setEnabled(not findings.empty)
        self.scan_finished.emit(findings)

    # -- clean -----------------------------------------------------------------
    def ticked(self) -> dict[str, list]:
        chosen: dict[str, list] = {STALE: [], ORPHANS: [], FOREIGN: []}
        for i in range(self.tree.topLevelItemCount()):
            head = self.tree.topLevelItem(i)
            for j in range(head.childCount()):
                item = head.child(j)
                if item.checkState(0) == Qt.CheckState.Checked:
                    key, value = item.data(0, Qt.ItemDataRole.UserRole)
                    chosen[key].append(value)
        return chosen

    def clean_selected(self) -> None:
        if self.findings is None:
            return
        chosen = self.ticked()
        files, procs = len(chosen[STALE]), len(chosen[ORPHANS]) + len(chosen[FOREIGN])
        if not (files or procs or self.findings.corrupt_records):
            self._idle("Nothing is ticked.")
            return
        foreign = self.findings.foreign
        question = confirmation(chosen[STALE], chosen[ORPHANS], chosen[FOREIGN], foreign)
        if not self.dialogs.ask_yes_no("Clean up", question, yes="Clean up", no="Cancel"):
            return
        found = self.findings
        subset = Findings(stale_stores=chosen[STALE], orphans=chosen[ORPHANS],
                          lock_holders=[p for p in found.lock_holders if p.ours] + chosen[FOREIGN],
                          corrupt_records=found.corrupt_records, live_stores=found.live_stores,
                          dead_runs=found.dead_runs)
        include_foreign = bool(chosen[FOREIGN])
        self._busy("Cleaning up…")
        self.workers.submit(lambda: clean(subset, include_foreign=include_foreign), self._on_cleaned,
                            self._on_failed)

    @Slot(object)
    def _on_cleaned(self, report: CleanReport) -> None:
        self.report = report
        self.tree.clear()
        for title, rows in (("Deleted", [(path, "") for path in report.deleted]),
                            ("Stopped (ended when asked)",
                             [(p.describe(), p.cmdline) for p in report.ended_politely()]),
                            ("Killed (did not end when asked)",
                             [(p.describe(), p.cmdline) for p in report.ended_by_force()]),
                            ("Left (could not be ended or deleted, and why)", list(report.left))):
            if rows:
                head = QTreeWidgetItem([f"{title} ({len(rows)})"])
                head.setFirstColumnSpanned(True)
                self.tree.addTopLevelItem(head)
                for what, why in rows:
                    head.addChild(QTreeWidgetItem([what, why]))
                head.setExpanded(True)
        self._idle(report.summary())
        self.clean_button.setEnabled(False)
        self.clean_finished.emit(report)

    @Slot(str)
    def _on_failed(self, text: str) -> None:
        self._idle("The clean-up failed: " + (text.strip().splitlines() or ["unknown error"])[-1])

    def _busy(self, text: str) -> None:
        self.status.setText(text)
        self.busy.show()
        self.clean_button.setEnabled(False)
        self.rescan_button.setEnabled(False)

    def _idle(self, text: str) -> None:
        self.status.setText(text)
        self.busy.hide()
        self.rescan_button.setEnabled(True)

    def result_text(self) -> str:
        """What the dialog says now, tree included (for tests and copy)."""
        lines = [self.status.text()]
        for i in range(self.tree.topLevelItemCount()):
            head = self.tree.topLevelItem(i)
            lines.append(head.text(0))
            lines += [f"  {head.child(j).text(0)} {head.child(j).text(1)}" for j in range(head.childCount())]
        return "\n".join(lines)
