"""A path field: a line edit plus a Browse… button that asks through the dialogs seam."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QPushButton, QWidget

FILE, FOLDER, NEW_FILE = "file", "folder", "new-file"


class PathEdit(QWidget):
    text_changed = Signal(str)

    def __init__(self, kind: str, title: str, dialogs, placeholder: str = "", parent: QWidget | None = None,
                 file_filter: str | None = None) -> None:
        super().__init__(parent)
        self.kind, self.title, self.dialogs = kind, title, dialogs
        self.file_filter = file_filter  # FILE: what the open dialog lists (default: Python scripts)
        self.edit = QLineEdit()
        self.edit.setPlaceholderText(placeholder)
        self.edit.setClearButtonEnabled(True)
        self.edit.textChanged.connect(self.text_changed)
        self.browse = QPushButton("Browse…")
        self.browse.setAccessibleName(f"Browse for {title.lower()}")
        self.browse.clicked.connect(self._browse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.browse)
        self.setFocusProxy(self.edit)

    def text(self) -> str:
        return self.edit.text()

    def setText(self, text: str) -> None:
        self.edit.setText(text)

    def _browse(self) -> None:
        start = self.edit.text()
        if self.kind == FILE and self.file_filter:
            chosen = self.dialogs.open_file(self.title, start, self.file_filter)
        else:
            ask = {FILE: self.dialogs.open_file, FOLDER: self.dialogs.folder, NEW_FILE: self.dialogs.save_file}
            chosen = ask[self.kind](self.title, start)
        if chosen:
            self.edit.setText(chosen)
