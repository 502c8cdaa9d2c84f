"""The Copy as dialog: a planned run shown as a cluster job (torchrun, SLURM, SkyPilot, Kubeflow), ready to copy
or save.

Each field is one of ``ddpstudio export-job``'s flags (core/jobs/engines.py
``Options``), and the text is written by the same ``export``, so what the
dialog copies is what the command prints for the same choices. The preview
follows every edit; one cluster run id is kept per dialog so it holds still.
Non-modal, like the node dialogs, so tests drive it as a user does.
"""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit,
                               QPlainTextEdit, QSpinBox, QVBoxLayout, QWidget)

from ddpstudio.core.jobs.engines import ENGINES, TITLES, Options, export, save
from ddpstudio.core.jobs.job import DEFAULT_PORT, JobError
from ddpstudio.core.plan import Plan
from ddpstudio.core.policy import new_run_id

ERROR_STYLE = "color: #c62828;"
SUFFIXES = {"torchrun": ".sh", "slurm": ".sbatch", "skypilot": ".yaml", "k8s": ".yaml"}


class JobDialog(QDialog):
    copied = Signal(str, str)  # engine, the text put on the clipboard
    saved = Signal(str, str)  # engine, the file written

    def __init__(self, plan: Plan, source: str, workers: int | None, engine: str, dialogs, what: str = "",
                 parent: QWidget | None = None) -> None:
        """``source``: the export's own words for where the plan came from (its header); ``what``: the title's."""
        super().__init__(parent)
        self.plan, self.source, self.workers, self.dialogs = plan, source, workers, dialogs
        self.run_id = new_run_id()
        self.text = ""
        self.setWindowTitle(f"Copy {what or source} as a cluster job")
        self.engine = QComboBox()
        for name in ENGINES:
            self.engine.addItem(TITLES[name], name)
        self.engine.setCurrentIndex(ENGINES.index(engine))
        self.nodes = _spin(1, 4096, 1)
        self.procs = _spin(0, 256, 0, f"as the run ({plan.ranks_per_node})")
        self.procs.setToolTip("Processes per node: one per GPU on a GPU cluster (--gpus-per-node)")
        self.device = QComboBox()
        self.device.addItem(f"as the run ({plan.device})", None)
        self.device.addItem("cuda (NCCL, the Linux GPU backend)", "cuda")
        self.device.addItem("cpu (Gloo)", "cpu")
        self.port = _spin(1, 65535, DEFAULT_PORT)
        self.restarts = _spin(-1, 100, -1, f"as the run ({plan.max_restarts})")
        self.restarts.setToolTip("torchrun's --max-restarts: how often a node restarts its ranks after a failure")
        self.host = QLineEdit()
        self.host.setPlaceholderText("empty: set HEAD_NODE on each node when it runs")
        self.accelerator = QLineEdit("A100")
        self.image = QLineEdit()
        self.image.setPlaceholderText("registry/image:tag with torch and ddpstudio")
        self.form = form = QFormLayout()
        form.addRow("Engine", self.engine)
        form.addRow("Nodes", self.nodes)
        form.addRow("Processes per node", self.procs)
        form.addRow("Device", self.device)
        form.addRow("Rendezvous port", self.port)
        form.addRow("Max restarts", self.restarts)
        form.addRow("Head node address", self.host)
        form.addRow("Accelerator type", self.accelerator)
        form.addRow("Container image", self.image)
        self.preview = QPlainTextEdit()
        self.preview.setReadOnly(True)
        self.preview.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.preview.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.preview.setAccessibleName("The job's text")
        self.problem = QLabel()
        self.problem.setStyleSheet(ERROR_STYLE)
        self.problem.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = buttons.addButton("&Copy", QDialogButtonBox.ButtonRole.ActionRole)
        self.save_button = buttons.addButton("&Save…", QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self.copy)
        self.save_button.clicked.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.preview, 1)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        for signal in (self.engine.currentIndexChanged, self.nodes.valueChanged, self.procs.valueChanged,
                       self.device.currentIndexChanged, self.port.valueChanged, self.restarts.valueChanged,
                       self.host.textChanged, self.accelerator.textChanged, self.image.textChanged):
            signal.connect(self.refresh)
        self.resize(900, 640)
        self.refresh()

    def options(self) -> Options:
        return Options(nodes=self.nodes.value(), procs_per_node=self.procs.value() or None,
                       device=self.device.currentData(), port=self.port.value(),
                       max_restarts=None if self.restarts.value() < 0 else self.restarts.value(),
                       host=self.host.text().strip() or None, accelerator=self.accelerator.text().strip() or "A100",
                       image=self.image.text().strip())

    @property
    def engine_name(self) -> str:
        return str(self.engine.currentData())

    @Slot()
    def refresh(self) -> None:
        """Write the job again for the fields as they are now; only the engine's own fields are shown."""
        engine = self.engine_name
        for field, shown in ((self.host, engine == "torchrun"), (self.accelerator, engine == "skypilot"),
                             (self.image, engine == "k8s")):
            self.form.setRowVisible(field, shown)
        try:
            self.text = export(engine, self.options(), self.plan, self.source, self.workers, run_id=self.run_id)
        except JobError as exc:
            self.text = ""
            self.problem.setText(str(exc))
        else:
            self.problem.setText("")
        self.preview.setPlainText(self.text)
        self.copy_button.setEnabled(bool(self.text))
        self.save_button.setEnabled(bool(self.text))

    @Slot()
    def copy(self) -> None:
        if self.text:
            QGuiApplication.clipboard().setText(self.text)
            self.copied.emit(self.engine_name, self.text)

    @Slot()
    def save(self) -> None:
        engine, text = self.engine_name, self.text
        path = self.dialogs.save_file(f"Save the {TITLES[engine]}", f"ddpstudio-{self.run_id}{SUFFIXES[engine]}")
        if not path or not text:
            return
        try:
            save(text, path)
        except (JobError, OSError) as exc:
            self.dialogs.error(f"Save the {TITLES[engine]}", str(exc))
            return
        self.saved.emit(engine, path)


def _spin(low: int, high: int, value: int, special: str = "") -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setValue(value)
    if special:
        spin.setSpecialValueText(special)  # shown at the minimum: the run's own value
    return spin
