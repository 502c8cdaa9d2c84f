"""Named presets of the whole run setup: save, load and delete, kept in the settings file."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QWidget

from ddpstudio.gui.form_state import SetupState

KEY = "presets"
PLACEHOLDER = "(choose a preset)"


class Presets:
    """name -> SetupState, stored under ``presets`` in :class:`~ddpstudio.gui.settings.Settings`."""

    def __init__(self, settings) -> None:
        self.settings = settings

    def _all(self) -> dict:
        raw = self.settings.get(KEY)
        return dict(raw) if isinstance(raw, dict) else {}

    def names(self) -> list[str]:
        return sorted(self._all(), key=str.lower)

    def get(self, name: str) -> SetupState | None:
        raw = self._all().get(name)
        return SetupState.from_dict(raw) if isinstance(raw, dict) else None

    def save(self, name: str, state: SetupState) -> None:
        presets = self._all()
        presets[name] = state.to_dict()
        self.settings.set(KEY, presets)
        self.settings.save()

    def delete(self, name: str) -> None:
        presets = self._all()
        presets.pop(name, None)
        self.settings.set(KEY, presets)
        self.settings.save()


class PresetBar(QWidget):
    """A row above the form: pick a preset to load it, save the form as one, delete one."""

    loaded = Signal(str)

    def __init__(self, presets: Presets, form, dialogs, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.presets, self.form, self.dialogs = presets, form, dialogs
        self.combo = QComboBox()
        self.combo.setAccessibleName("Presets")
        self.combo.setToolTip("Load a saved setup (every field of the form)")
        self.save_button = QPushButton("Save as…")
        self.save_button.setToolTip("Save the whole setup under a name")
        self.delete_button = QPushButton("Delete")
        self.delete_button.setToolTip("Delete the chosen preset")
        label = QLabel("Preset:")
        label.setBuddy(self.combo)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (label, self.combo):
            layout.addWidget(widget)
        layout.setStretch(1, 1)
        layout.addWidget(self.save_button)
        layout.addWidget(self.delete_button)
        self.combo.activated.connect(self._on_chosen)
        form.changed.connect(self._mark_edited)
        self.save_button.clicked.connect(self.save_current)
        self.delete_button.clicked.connect(self.delete_current)
        self.reload()

    def reload(self, select: str = "") -> None:
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItem(PLACEHOLDER, "")
        for name in self.presets.names():
            self.combo.addItem(name, name)
        self.combo.setCurrentIndex(max(0, self.combo.findData(select)))
        self.combo.blockSignals(False)
        self.delete_button.setEnabled(bool(select))

    def _mark_edited(self) -> None:
        """The chosen preset's name says "(edited)" once the form no longer holds it (issue 24)."""
        index, name = self.combo.currentIndex(), self.combo.currentData()
        if name:
            edited = self.presets.get(name) != self.form.state()
            self.combo.setItemText(index, f"{name} (edited)" if edited else name)

    def _on_chosen(self, index: int) -> None:
        name = self.combo.itemData(index)
        self.delete_button.setEnabled(bool(name))
        state = self.presets.get(name) if name else None
        if state is not None:
            self.form.set_state(state)
            self.loaded.emit(name)

    def save_current(self) -> str:
        name = self.dialogs.ask_text("Save preset", "Name of this setup:", self.combo.currentData() or "")
        if not name:
            return ""
        if name in self.presets.names() and name != self.combo.currentData():
            if not self.dialogs.ask_yes_no("Replace preset?", f"A preset named {name!r} exists. Replace it?",
                                           yes="Replace", no="Keep it"):
                return ""
        self.presets.save(name, self.form.state())
        self.reload(select=name)
        return name

    def delete_current(self) -> None:
        name = self.combo.currentData()
        if name and self.dialogs.ask_yes_no("Delete preset?", f"Delete the preset {name!r}?",
                                            yes="Delete", no="Keep it"):
            self.presets.delete(name)
            self.reload()
