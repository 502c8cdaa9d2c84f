"""The Benchmark tab: run the form's training at several world sizes and show how it scales.

Its own inputs (world sizes, steps, warm-up, comparisons) sit above the
progress line, the table, a bar chart of speedup against the ideal line and
the verdict. What to train comes from the run setup form (``request_of``);
the run itself is a :class:`BenchController`. Exports go through the window's
``Dialogs`` and are written on a worker.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (QCheckBox, QFormLayout, QGridLayout, QHBoxLayout, QLabel, QLineEdit, QProgressBar,
                               QPushButton, QSpinBox, QSplitter, QVBoxLayout, QWidget)

from ddpstudio.core.bench import BenchConfig, BenchProgress, BenchResult
from ddpstudio.core.bench.analysis import default_world_sizes, parse_world_sizes
from ddpstudio.core.bench.export import write_csv, write_png
from ddpstudio.core.policy import Request
from ddpstudio.gui.bench_controller import BenchController
from ddpstudio.gui.bench_results import BenchTable, SpeedupChart
from ddpstudio.gui.setup_form import ERROR_COLOUR, INVALID_STYLE
from ddpstudio.gui.workers import Workers

COMPARE = {"backend": "Gloo vs NCCL", "store": "FileStore vs TCP store", "batch": "per-rank vs split batch",
           "exchange": "native vs staged (+fp16) gradient exchange"}
PHASES = {"starting": "starting", "warmup": "warming up", "measuring": "measuring", "done": "done",
          "failed": "failed"}


class BenchView(QWidget):
    exported = Signal(str)  # the path of a CSV or PNG just written
    run_allowed_changed = Signal()

    def __init__(self, controller: BenchController, workers: Workers, dialogs,
                 request_of: Callable[[], Request], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller, self.workers, self.dialogs, self.request_of = controller, workers, dialogs, request_of
        self.machine = None  # the Inventory, once known
        self.allowed = False  # the window's say: no training run, and a valid form
        self.sizes: list[int] | None = None
        self._edited_sizes = False
        self.workload = "recipe"
        self._why_not = {what: "" for what in COMPARE}  # why a comparison cannot run here ('' if it can)
        self._build()
        controller.bench_progress.connect(self._on_progress)
        controller.bench_finished.connect(self._on_finished)
        controller.bench_failed.connect(self._on_failed)
        controller.active_changed.connect(self._update_buttons)

    # -- building ------------------------------------------------------------
    def _build(self) -> None:
        self.sizes_edit = QLineEdit("1, 2")
        self.sizes_edit.setToolTip("Ranks to run, separated by commas; each runs the same per-rank batch")
        self.sizes_edit.setAccessibleName("World sizes")
        self.sizes_error = QLabel()
        self.sizes_error.setWordWrap(True)
        self.sizes_error.setStyleSheet(f"color: {ERROR_COLOUR};")
        self.sizes_error.hide()
        self.steps = QSpinBox()
        self.steps.setRange(1, 100_000)
        self.steps.setValue(20)
        self.warmup = QSpinBox()
        self.warmup.setRange(1, 100_000)
        self.warmup.setValue(5)
        self.warmup.setToolTip("Steps run first and not counted: the first steps are never typical")
        self.compare = {what: QCheckBox(text) for what, text in COMPARE.items()}
        self.script_batch = QSpinBox()
        self.script_batch.setRange(0, 1 << 20)
        self.script_batch.setSpecialValueText("unknown (rank-steps/s)")
        self.script_batch.setToolTip("Your script's per-rank batch, to turn steps/s into samples/s")
        sizes_cell = QWidget()
        sizes_box = QVBoxLayout(sizes_cell)
        sizes_box.setContentsMargins(0, 0, 0, 0)
        sizes_box.addWidget(self.sizes_edit)
        sizes_box.addWidget(self.sizes_error)
        compare_row = QGridLayout()  # two a row: four in one row would not fit a 1280-pixel screen
        for i, box in enumerate(self.compare.values()):
            compare_row.addWidget(box, i // 2, i % 2)
        form = QFormLayout()
        form.addRow("World sizes:", sizes_cell)
        counts = QHBoxLayout()
        for label, spin in (("Measured steps:", self.steps), ("Warm-up steps:", self.warmup)):
            counts.addWidget(QLabel(label))
            counts.addWidget(spin)
        counts.addStretch(1)
        form.addRow(counts)
        form.addRow("Compare:", compare_row)
        form.addRow("Script batch/rank:", self.script_batch)
        self._form = form

        self.run_button = QPushButton("R&un benchmark")
        self.stop_button = QPushButton("S&top benchmark")
        self.csv_button = QPushButton("E&xport CSV…")
        self.png_button = QPushButton("Export PN&G…")
        buttons = QHBoxLayout()
        for button in (self.run_button, self.stop_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        for button in (self.csv_button, self.png_button):
            buttons.addWidget(button)
        self.status = QLabel("Runs the training set up on the left at each world size, then compares them.")
        self.status.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(8)

        self.table = BenchTable()
        self.chart = SpeedupChart()
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        self.verdict.setTextFormat(Qt.TextFormat.PlainText)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        results = QSplitter(Qt.Orientation.Vertical)
        results.addWidget(self.table)
        results.addWidget(self.chart)
        results.setStretchFactor(1, 1)
        results.setSizes([150, 450])

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(self.bar)
        layout.addWidget(results, 1)
        layout.addWidget(self.verdict)

        self.sizes_edit.textChanged.connect(self._on_sizes_edited)
        self.run_button.clicked.connect(self.run)
        self.stop_button.clicked.connect(self.controller.stop)
        self.csv_button.clicked.connect(lambda: self.export("csv"))
        self.png_button.clicked.connect(lambda: self.export("png"))
        self._validate()

    # -- inputs ----------------------------------------------------------------
    def set_machine(self, machine) -> None:
        """Defaults and what this machine can compare, once the inventory is known."""
        self.machine = machine
        if not self._edited_sizes:
            default = default_world_sizes(machine.gpu_count, machine.cpu_mode)
            self.sizes_edit.blockSignals(True)
            self.sizes_edit.setText(", ".join(map(str, default)))
            self.sizes_edit.blockSignals(False)
        self._validate()

    def set_workload(self, workload: str) -> None:
        """The form's kind of training decides which comparisons make sense."""
        self.workload = workload
        self._form.setRowVisible(self.script_batch, workload.startswith("script"))
        self._update_compare()

    def _update_compare(self) -> None:
        workload = self.workload
        why_not = self._why_not = {what: "" for what in COMPARE}
        if self.machine is not None and self.machine.cpu_mode:
            why_not["backend"] = "NCCL needs CUDA GPUs: this machine trains on the CPU with Gloo only"
        if workload == "script-env":
            why_not["store"] = "a torchrun-style script needs the TCP store"
        if workload.startswith("script"):
            why_not["batch"] = "DDP Studio sets the batch only for the built-in recipe"
        for what, box in self.compare.items():
            if why_not[what]:
                box.setChecked(False)
            box.setToolTip(why_not[what] or f"Also run the whole sweep with {COMPARE[what]} flipped")
        self._update_buttons()

    def inputs(self) -> dict:
        """The tab's own inputs, for the settings file (world sizes only once the user typed them)."""
        return {"world_sizes": self.sizes_edit.text() if self._edited_sizes else None,
                "steps": self.steps.value(), "warmup": self.warmup.value(),
                "compare": [w for w, box in self.compare.items() if box.isChecked()]}

    def set_inputs(self, raw: dict | None) -> None:
        raw = raw if isinstance(raw, dict) else {}
        if isinstance(raw.get("world_sizes"), str):
            self.sizes_edit.setText(raw["world_sizes"])  # marks them as the user's: the machine keeps out
        for spin, key in ((self.steps, "steps"), (self.warmup, "warmup")):
            if isinstance(raw.get(key), int):
                spin.setValue(raw[key])
        for what, box in self.compare.items():
            box.setChecked(what in (raw.get("compare") or []) and not self._why_not[what])

    @Slot(str)
    def _on_sizes_edited(self, _text: str) -> None:
        self._edited_sizes = True
        self._validate()

    def _validate(self) -> None:
        reason = ""
        try:
            self.sizes = parse_world_sizes(self.sizes_edit.text())
        except ValueError as exc:
            self.sizes, reason = None, str(exc)
        m = self.machine
        if self.sizes and m is not None and not m.cpu_mode and self.sizes[-1] > m.gpu_count:
            self.sizes, reason = None, f"this machine has {m.gpu_count} GPU(s): at most {m.gpu_count} ranks"
        self.sizes_edit.setStyleSheet(INVALID_STYLE if reason else "")
        self.sizes_error.setText(reason)
        self.sizes_error.setVisible(bool(reason))
        self._update_compare()

    def set_allowed(self, allowed: bool) -> None:
        """Whether the window lets a benchmark start now (no training run, a valid form)."""
        if allowed != self.allowed:
            self.allowed = allowed
            self._update_buttons()

    @property
    def can_run(self) -> bool:
        return self.allowed and self.sizes is not None and not self.controller.active

    def _update_buttons(self, *_args) -> None:
        active = self.controller.active
        self.run_button.setEnabled(self.can_run)
        self.stop_button.setEnabled(active)
        for widget in (self.sizes_edit, self.steps, self.warmup, self.script_batch):
            widget.setEnabled(not active)
        for what, box in self.compare.items():
            box.setEnabled(not active and not self._why_not[what])
        done = self.controller.result is not None and not active
        self.csv_button.setEnabled(done)
        self.png_button.setEnabled(done)
        self.run_allowed_changed.emit()

    # -- running -----------------------------------------------------------------
    def config(self) -> BenchConfig:
        return BenchConfig(request=self.request_of(), world_sizes=self.sizes, steps=self.steps.value(),
                           warmup=self.warmup.value(),
                           compare=[w for w, box in self.compare.items() if box.isChecked()],
                           script_batch_size=self.script_batch.value() or None)

    def run(self) -> None:
        if not self.can_run:
            return
        self.table.setRowCount(0)
        self.chart.show_result(None)
        self.verdict.clear()
        self.bar.setValue(0)
        self.status.setText("Starting the benchmark…")
        self.controller.start(self.config(), self.machine)

    @Slot(object)
    def _on_progress(self, p: BenchProgress) -> None:
        step = f" · step {p.step} of {p.total_steps}" if p.phase in ("warmup", "measuring") else ""
        note = f" · {p.message}" if p.message and p.phase in ("failed",) else ""
        self.status.setText(f"Run {p.run_index + 1} of {p.runs}: {p.world_size} rank(s), {p.variant} — "
                            f"{PHASES.get(p.phase, p.phase)}{step}{note}")
        within = 1.0 if p.phase in ("done", "failed") else p.step / p.total_steps if p.total_steps else 0.0
        self.bar.setValue(int(1000 * (p.run_index + within) / max(p.runs, 1)))

    @Slot(object)
    def _on_finished(self, result: BenchResult | None) -> None:
        if result is None:
            return
        self.show_result(result)
        ran = len([r for r in result.rows if r.ok])
        self.status.setText(f"Stopped: {ran} of {len(result.rows)} run(s) measured" if result.stopped
                            else f"Done: {ran} of {len(result.rows)} run(s) measured")
        self.bar.setValue(1000)

    @Slot(str)
    def _on_failed(self, reason: str) -> None:
        self.status.setText(f"The benchmark could not run: {reason}")
        self.bar.setValue(0)

    def show_result(self, result: BenchResult) -> None:
        self.table.show_result(result)
        self.chart.show_result(result)
        self.verdict.setText("\n".join([result.verdict, *result.notes]).strip())

    # -- export ----------------------------------------------------------------------
    def export(self, kind: str) -> None:
        result = self.controller.result
        if result is None:
            return
        path = self.dialogs.save_file(f"Export the benchmark as {kind.upper()}", f"ddpstudio-bench.{kind}")
        if not path:
            return
        if not path.lower().endswith(f".{kind}"):
            path += f".{kind}"
        write = (lambda p: write_csv(result, p)) if kind == "csv" else (lambda p: write_png(result, p))
        self.workers.submit(lambda: str(write(path)), self._on_exported, self._on_export_failed)

    @Slot(object)
    def _on_exported(self, path: str) -> None:
        self.status.setText(f"Saved {path}")
        self.exported.emit(path)

    @Slot(str)
    def _on_export_failed(self, text: str) -> None:
        reason = text.strip().splitlines()[-1] if text.strip() else "unknown error"
        self.status.setText(f"Could not export: {reason}")
        self.dialogs.error("Could not export the benchmark", reason, text)
