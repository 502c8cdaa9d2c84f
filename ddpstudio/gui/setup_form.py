"""The run setup form: what to train, how to distribute it, how long; problems shown per field.

A view only: :meth:`SetupForm.state` reads it into a :class:`SetupState`,
:meth:`set_state` fills it, :meth:`show_problems` marks fields red with the
reason under them. Validation itself runs elsewhere (``setup_check``).
"""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QLabel, QLineEdit,
                               QSpinBox, QVBoxLayout, QWidget)

from ddpstudio.core.plan import DEFAULT_DIST_ARGS, LR_SCHEDULES
from ddpstudio.core.platform import Platform, current
from ddpstudio.core.policy import PolicyError, effective_batch, split_note
from ddpstudio.core.validate import Problem
from ddpstudio.core.words import counted
from ddpstudio.gui.fitted_label import FittedLabel
from ddpstudio.gui.field_help import BALANCE_HELP, FIELD_HELP
from ddpstudio.gui.form_state import COMMON_MODELS, SetupState
from ddpstudio.gui.path_edit import FILE, FOLDER, NEW_FILE, PathEdit
from ddpstudio.gui.style_offer import StyleOffer

INVALID_STYLE = "border: 1px solid #c62828; border-radius: 2px;"
ERROR_COLOUR = "#c62828"
# The core's problem fields that have no widget of that name.
FIELD_ALIASES = {"script": "script_path", "cwd": "script_cwd", "script_style": "workload", "python": "script_python"}
# The core's problem fields set outside the form (the GPU cards' check boxes): their problems show at its top.
OUTSIDE_LABELS = {"gpus": "GPUs"}


def _combo(items: list[tuple[str, str]], tips: dict[str, str] | None = None) -> QComboBox:
    """A choice of ``(value, text)`` items; ``tips`` gives an item its own tooltip (by value)."""
    combo = QComboBox()
    for value, text in items:
        combo.addItem(text, value)
        if tips and value in tips:
            combo.setItemData(combo.count() - 1, tips[value], Qt.ItemDataRole.ToolTipRole)
    return combo


def _spin(low: int, high: int, special: str = "", suffix: str = "") -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setSuffix(suffix)
    if special:
        spin.setSpecialValueText(special)
    return spin


# The Python field's Browse: an environment's interpreter, which the default filter (Python scripts) would hide.
PYTHON_FILTER_WINDOWS = "Python (python.exe pythonw.exe);;Programs (*.exe);;All files (*)"
PYTHON_FILTER = "Python (python python3 python3.*);;All files (*)"


class SetupForm(QWidget):
    changed = Signal()

    def __init__(self, dialogs, parent: QWidget | None = None, platform: Platform | None = None) -> None:
        super().__init__(parent)
        self.platform = platform
        self.world_hint = 2  # ranks "auto" gives on this machine, for the effective batch
        self.gpus: list[str] = []  # the GPUs that train, ticked on the machine panel's cards ([]: all)
        self.editors: dict[str, QWidget] = {}
        self.errors: dict[str, QLabel] = {}
        self._rows: dict[str, tuple[QFormLayout, QWidget]] = {}

        e = self.editors
        e["workload"] = _combo([("recipe", "Built-in recipe (torchvision classifier)"),
                                ("script-args", "My script: distributed settings as arguments"),
                                ("script-env", "My script: torchrun environment variables"),
                                ("script-spawn", "My script: starts its own ranks (mp.spawn)")])
        e["model"] = QComboBox()
        e["model"].setEditable(True)
        e["model"].addItems(COMMON_MODELS)
        e["data"] = _combo([("synthetic", "Synthetic images (no data needed)"),
                            ("folder", "Image folder (one sub-folder per class)"),
                            ("cifar10", "CIFAR-10 folder")])
        e["data_dir"] = PathEdit(FOLDER, "Data folder", dialogs)
        e["image_size"] = _spin(8, 1024, suffix=" px")
        e["script_path"] = PathEdit(FILE, "Training script", dialogs, "a .py file")
        e["script_args"] = QLineEdit()
        e["script_args"].setPlaceholderText("--epochs 10 --lr 0.1")
        e["dist_args"] = QLineEdit()
        e["script_cwd"] = PathEdit(FOLDER, "Working folder", dialogs, "the script's folder if empty")
        e["script_python"] = PathEdit(FILE, "Python", dialogs, "DDP Studio's own Python if empty",
                                      file_filter=PYTHON_FILTER_WINDOWS if (platform or current()).is_windows
                                      else PYTHON_FILTER)
        e["world_size"] = _spin(0, 1024, special="auto (one per GPU; 2 on the CPU)")
        e["backend"] = _combo([("auto", "auto"), ("gloo", "gloo"), ("nccl", "nccl")])
        e["store"] = _combo([("fresh", "Fresh FileStore for each run (recommended)"),
                             ("fixed", "FileStore at a fixed path"), ("tcp", "TCP store")])
        e["store_path"] = PathEdit(NEW_FILE, "Store file", dialogs, r"e.g. D:\pg")
        e["port"] = _spin(0, 65535, special="pick a free port")
        e["grad_exchange"] = _combo([("auto", "auto"), ("native", "native: on the gradients' device"),
                                     ("staged", "staged: through CPU memory")])
        e["grad_compression"] = _combo([("none", "none: full precision"),
                                        ("fp16", "fp16: half the bytes, approximate")])
        e["rank_helper"] = QCheckBox("Rank helper in my script")
        e["one_gpu_per_rank"] = QCheckBox("One GPU per rank (for scripts that use cuda:0)")
        e["batch_size"] = _spin(1, 1 << 20)
        e["batch_mode"] = _combo([("per-rank", "per rank: keep it on every rank"),
                                  ("split", "split it over the ranks")])
        e["accumulate"] = _spin(1, 1 << 16, suffix=" micro-batches per step")
        e["balance"] = _combo([("auto", "auto: measured when the GPUs differ"), ("equal", "equal on every rank"),
                               ("measured", "measured for each rank's speed")], BALANCE_HELP)
        e["scale_lr"] = QCheckBox("Scale the learning rate with the effective batch")
        e["lr"] = QDoubleSpinBox()
        e["lr"].setDecimals(5)
        e["lr"].setRange(0.00001, 100.0)
        e["lr"].setSingleStep(0.01)
        e["lr_schedule"] = _combo([(name, name) for name in LR_SCHEDULES])
        e["warmup_steps"] = _spin(0, 1 << 30, special="none")
        e["eval_every"] = _spin(0, 1 << 30, special="each epoch's end", suffix=" steps")
        e["epochs"] = _spin(1, 100000)
        e["max_steps"] = _spin(0, 1 << 30, special="no limit")
        e["workers"] = _spin(-1, 64, special="auto (for this machine)")
        e["checkpoint_dir"] = PathEdit(FOLDER, "Checkpoint folder", dialogs, "no checkpoints if empty")
        e["checkpoint_every"] = _spin(0, 1 << 30, special="each epoch's end", suffix=" steps")
        e["resume"] = QCheckBox("Resume from the checkpoint in that folder")
        e["keep_training"] = QCheckBox("Keep training if a rank crashes")
        e["max_restarts"] = _spin(1, 1000, suffix=" restarts at most")
        e["hang_timeout"] = _spin(0, 86400, special="not watched", suffix=" s")
        e["on_hang"] = _combo([("warn", "warn and offer Stop"), ("stop", "stop the run (failed)")])
        self.effective = QLabel()
        self.effective.setWordWrap(True)
        self.effective.setAccessibleName("Effective batch")
        self.general_error = self._error_label()

        # Mnemonics are unique among what shows at once (the window's buttons and menus included).
        what = self._group("What to train", [
            ("workload", "&Kind:"), ("model", "&Model:"), ("data", "&Data:"), ("data_dir", "Data folder:"),
            ("image_size", "Image size:"), ("script_path", "Scr&ipt:"), ("script_args", "&Arguments:"),
            ("dist_args", "Distributed args:"), ("script_cwd", "&Working folder:"), ("script_python", "Python:")])
        dist = self._group("Distributed", [
            ("world_size", "Ranks:"), ("backend", "&Backend:"), ("store", "St&ore:"),
            ("store_path", "Store path:"), ("port", "Port:"), ("grad_exchange", "Gradient exchange:"),
            ("grad_compression", "Gradient compression:"), ("rank_helper", ""), ("one_gpu_per_rank", ""),
            ("keep_training", ""), ("max_restarts", "Restarts:"), ("hang_timeout", "Stuck rank after:"),
            ("on_hang", "On a stuck rank:")])
        self.training = self._group("Training", [
            ("batch_size", "Batch si&ze:"), ("batch_mode", "Batch mode:"), ("accumulate", "Accumulate:"),
            ("scale_lr", ""), ("balance", "Balance:"),  # after the effective batch (row 4), which it keeps
            ("lr", "Learning rate:"), ("lr_schedule", "LR schedule:"), ("warmup_steps", "Warm-up steps:"),
            ("eval_every", "Evaluate every:"), ("epochs", "&Epochs:"), ("max_steps", "Max ste&ps:"),
            ("workers", "DataLoader workers:"), ("checkpoint_dir", "&Checkpoints:"),
            ("checkpoint_every", "Checkpoint every:"), ("resume", "")])
        self.training.layout().insertRow(4, "Effective batch:", self.effective)
        self._align_labels((what, dist, self.training))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.general_error)
        for group in (what, dist, self.training):
            layout.addWidget(group)
        layout.addStretch(1)
        for name, editor in self.editors.items():
            (editor.edit if isinstance(editor, PathEdit) else editor).setToolTip(FIELD_HELP[name])
        self._tooltips = dict(FIELD_HELP)
        self.style_offer = StyleOffer(e["workload"], e["script_path"], e["script_args"], e["dist_args"], platform)
        self._rows["workload"][1].layout().insertWidget(1, self.style_offer.note)
        self._connect()
        self.set_state(SetupState())

    # -- building ------------------------------------------------------------
    def _error_label(self) -> QLabel:
        label = FittedLabel()  # a long problem shows whole (gui/fitted_label.py)
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setStyleSheet(f"color: {ERROR_COLOUR};")
        label.hide()
        return label

    def _group(self, title: str, rows: list[tuple[str, str]]) -> QGroupBox:
        group = QGroupBox(title)
        form = QFormLayout(group)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        for name, text in rows:
            editor = self.editors[name]
            error = self.errors[name] = self._error_label()
            cell = QWidget()
            box = QVBoxLayout(cell)
            box.setContentsMargins(0, 0, 0, 0)
            box.setSpacing(2)
            # At the row's top even while the row is taller than its editor (the problem under it just hidden,
            # the form not yet laid out again): a box centres what cannot grow, and the field jumped down.
            box.setAlignment(Qt.AlignmentFlag.AlignTop)
            box.addWidget(editor)
            box.addWidget(error)
            if text:
                label = QLabel(text)
                label.setBuddy(editor)
                form.addRow(label, cell)
            else:
                form.addRow(cell)
            self._rows[name] = (form, cell)
        return group

    @staticmethod
    def _align_labels(groups) -> None:
        """One label width for every group, so the field columns line up down the form."""
        labels = [g.layout().itemAt(i).widget() for g in groups for i in range(g.layout().count())]
        labels = [w for w in labels if isinstance(w, QLabel) and w.buddy() is not None or
                  isinstance(w, QLabel) and w.text().endswith(":")]
        width = max(label.sizeHint().width() for label in labels)
        for label in labels:
            label.setMinimumWidth(width)

    def _connect(self) -> None:
        self.editors["script_path"].text_changed.connect(self._show_default_folder)
        for name, editor in self.editors.items():
            if isinstance(editor, PathEdit):
                editor.text_changed.connect(self._on_edit)
            elif isinstance(editor, QComboBox):
                editor.currentIndexChanged.connect(self._on_edit)
                if editor.isEditable():
                    editor.editTextChanged.connect(self._on_edit)
            elif isinstance(editor, (QSpinBox, QDoubleSpinBox)):
                editor.valueChanged.connect(self._on_edit)
            elif isinstance(editor, QCheckBox):
                editor.toggled.connect(self._on_edit)
            elif isinstance(editor, QLineEdit):
                editor.textChanged.connect(self._on_edit)

    def _on_edit(self, *_args) -> None:
        self._update_visibility()
        self._update_effective()
        self.changed.emit()

    # -- state ---------------------------------------------------------------
    def state(self) -> SetupState:
        e = self.editors
        return SetupState(
            workload=e["workload"].currentData(), model=e["model"].currentText().strip(),
            data=e["data"].currentData(), data_dir=e["data_dir"].text(), image_size=e["image_size"].value(),
            script_path=e["script_path"].text(), script_args=e["script_args"].text(),
            dist_args=e["dist_args"].text(), script_cwd=e["script_cwd"].text(),
            script_python=e["script_python"].text(),
            world_size=e["world_size"].value(), backend=e["backend"].currentData(),
            store=e["store"].currentData(), store_path=e["store_path"].text(), port=e["port"].value(),
            batch_size=e["batch_size"].value(), batch_mode=e["batch_mode"].currentData(),
            accumulate=e["accumulate"].value(), checkpoint_every=e["checkpoint_every"].value(),
            keep_training=e["keep_training"].isChecked(), max_restarts=e["max_restarts"].value(),
            hang_timeout=e["hang_timeout"].value(), on_hang=e["on_hang"].currentData(),
            balance=e["balance"].currentData(),
            scale_lr=e["scale_lr"].isChecked(), lr=e["lr"].value(), epochs=e["epochs"].value(),
            max_steps=e["max_steps"].value(), workers=e["workers"].value(),
            checkpoint_dir=e["checkpoint_dir"].text(), resume=e["resume"].isChecked(),
            grad_exchange=e["grad_exchange"].currentData(), grad_compression=e["grad_compression"].currentData(),
            rank_helper=e["rank_helper"].isChecked(), one_gpu_per_rank=e["one_gpu_per_rank"].isChecked(),
            lr_schedule=e["lr_schedule"].currentData(), warmup_steps=e["warmup_steps"].value(),
            eval_every=e["eval_every"].value(), gpus=list(self.gpus))

    def set_state(self, state: SetupState) -> None:
        e = self.editors
        self.gpus = list(state.gpus)
        blockers = [editor.blockSignals(True) for editor in e.values()]
        try:
            for name in ("workload", "data", "backend", "store", "batch_mode", "grad_exchange", "grad_compression",
                         "lr_schedule", "balance", "on_hang"):
                index = e[name].findData(getattr(state, name))
                e[name].setCurrentIndex(max(index, 0))
            e["model"].setCurrentText(state.model)
            for name in ("data_dir", "script_path", "script_args", "script_cwd", "script_python", "store_path",
                         "checkpoint_dir"):
                e[name].setText(getattr(state, name))
            e["dist_args"].setText(state.dist_args or DEFAULT_DIST_ARGS)
            for name in ("image_size", "world_size", "port", "batch_size", "epochs", "max_steps", "workers", "lr",
                         "warmup_steps", "eval_every", "accumulate", "checkpoint_every", "max_restarts",
                         "hang_timeout"):
                e[name].setValue(getattr(state, name))
            e["scale_lr"].setChecked(state.scale_lr)
            e["resume"].setChecked(state.resume)
            e["keep_training"].setChecked(state.keep_training)
            e["rank_helper"].setChecked(state.rank_helper)
            e["one_gpu_per_rank"].setChecked(state.one_gpu_per_rank)
        finally:
            for editor, was in zip(e.values(), blockers):
                editor.blockSignals(was)
        self.style_offer.sync()
        self._show_default_folder()  # its signal was blocked while the form was filled
        self._on_edit()

    # -- what shows ------------------------------------------------------------
    def _set_row_visible(self, name: str, visible: bool) -> None:
        form, cell = self._rows[name]
        form.setRowVisible(cell, visible)

    def _update_visibility(self) -> None:
        s = self.state()
        recipe = not s.is_script
        for name in ("model", "data", "image_size"):
            self._set_row_visible(name, recipe)
        self._set_row_visible("data_dir", recipe and s.data != "synthetic")
        for name in ("script_path", "script_args", "script_cwd", "script_python"):
            self._set_row_visible(name, not recipe)
        self._set_row_visible("dist_args", s.workload in ("script-args", "script-spawn"))
        self._set_row_visible("world_size", s.workload != "script-spawn")  # the script decides
        self._set_row_visible("store_path", s.store == "fixed")
        self._set_row_visible("port", s.store == "tcp")
        self._set_row_visible("rank_helper", not recipe)
        self._set_row_visible("one_gpu_per_rank", not recipe)
        self._set_row_visible("max_restarts", s.keep_training)
        self._set_row_visible("on_hang", s.hang_timeout > 0)  # "not watched": no stuck rank to act on
        self._set_row_visible("balance", self._world(s) > 1)  # one rank has nobody to balance with
        self.training.setVisible(recipe)

    def set_gpus(self, ids: list[str]) -> None:
        """The GPUs ticked on the machine panel ([]: all): part of the setup, checked and saved with it."""
        if ids != self.gpus:
            self.gpus = list(ids)
            self._on_edit()

    def set_world_hint(self, ranks: int) -> None:
        """How many ranks "auto" means here (from the inventory or the last plan)."""
        if ranks != self.world_hint:
            self.world_hint = ranks
            self._update_visibility()
            self._update_effective()

    def _world(self, s: SetupState) -> int:
        return s.world_size or len(s.gpus) or self.world_hint  # auto: one rank per chosen GPU

    def _show_default_folder(self, *_args) -> None:
        """The Working folder's placeholder names the folder an empty field means for this script (the
        script's, or the one above its package: form_state.SetupState.working_folder)."""
        path = self.editors["script_path"].text().strip()
        folder = SetupState(script_path=path).working_folder()
        edit = self.editors["script_cwd"].edit
        edit.setPlaceholderText(folder or "the script's folder if empty")
        if folder is None:
            self._tooltips["script_cwd"] = FIELD_HELP["script_cwd"]
        else:
            above = os.path.normcase(folder) != os.path.normcase(os.path.dirname(os.path.abspath(path)))
            said = "the folder above its package, which it runs from as a module" if above else "its own folder"
            self._tooltips["script_cwd"] = f"{FIELD_HELP['script_cwd']}\nEmpty, this script runs in {folder}: {said}."
        if not self.errors["script_cwd"].text():
            edit.setToolTip(self._tooltips["script_cwd"])

    def _update_effective(self) -> None:
        s = self.state()
        world = self._world(s)
        try:
            per_rank, total = effective_batch(s.batch_size, world, s.batch_mode, s.accumulate)
        except PolicyError as exc:
            self.effective.setText(str(exc))
            return
        lr = s.lr * world * s.accumulate if s.scale_lr else s.lr
        micro = f" × {s.accumulate} micro-batches" if s.accumulate > 1 else ""
        split = split_note(s.batch_size, total, world, s.accumulate) if s.batch_mode == "split" else ""
        self.effective.setText(f"{total} = {counted(world, 'rank')} × {per_rank} per rank{micro}{split} · "
                               f"learning rate {lr:g}")

    def show_problems(self, problems: list[Problem] | tuple[Problem, ...]) -> None:
        """Mark each problem's field red with the reason under it; clear the others."""
        by_field: dict[str, list[str]] = {}
        general = []
        for problem in problems:
            name = FIELD_ALIASES.get(problem.field, problem.field)
            if name in self.editors:
                by_field.setdefault(name, []).append(problem.message)
            else:
                general.append(problem.message)
        for name, editor in self.editors.items():
            messages = by_field.get(name, [])
            target = editor.edit if isinstance(editor, PathEdit) else editor
            target.setStyleSheet(INVALID_STYLE if messages else "")
            target.setToolTip("\n".join([*messages, *([""] if messages else []), self._tooltips[name]]))
            target.setAccessibleDescription("\n".join(messages))
            self.errors[name].setText("\n".join(messages))
            self.errors[name].setVisible(bool(messages))
        self.general_error.setText("\n".join(general))
        self.general_error.setVisible(bool(general))

    def field_label(self, name: str) -> str:
        """The words the form shows for a field ("Batch size"), for messages that name it."""
        name = FIELD_ALIASES.get(name, name)
        if name not in self._rows:
            return OUTSIDE_LABELS.get(name, name.replace("_", " "))
        form, cell = self._rows[name]
        label = form.labelForField(cell)
        editor = self.editors[name]
        text = label.text() if label is not None else editor.text() if isinstance(editor, QCheckBox) else name
        return text.replace("&", "").rstrip(":")

    def problem_text(self, name: str) -> str:
        """The reason shown under a field ('' when it is valid)."""
        label = self.errors[FIELD_ALIASES.get(name, name)]
        return label.text() if label.isVisibleTo(self) else ""
