"""Every question the window asks goes through one ``Dialogs`` object, so tests can answer it.

Tests pass their own object with the same methods (no modal dialog ever
blocks a test); the window never calls QMessageBox or QFileDialog directly.
"""

from __future__ import annotations

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget


class Dialogs:
    def __init__(self, parent: QWidget | None = None) -> None:
        self.parent = parent

    def ask_yes_no(self, title: str, text: str, yes: str = "Yes", no: str = "No") -> bool:
        box = QMessageBox(QMessageBox.Icon.Question, title, text, parent=self.parent)
        yes_button = box.addButton(yes, QMessageBox.ButtonRole.AcceptRole)
        no_button = box.addButton(no, QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(no_button)
        box.exec()
        return box.clickedButton() is yes_button

    def info(self, title: str, text: str) -> None:
        QMessageBox.information(self.parent, title, text)

    def error(self, title: str, text: str, details: str = "") -> None:
        box = QMessageBox(QMessageBox.Icon.Critical, title, text, parent=self.parent)
        if details:
            box.setDetailedText(details)
        box.exec()

    def ask_text(self, title: str, label: str, text: str = "") -> str:
        """A line of text from the user ('' when cancelled)."""
        from PySide6.QtWidgets import QInputDialog

        value, ok = QInputDialog.getText(self.parent, title, label, text=text)
        return value.strip() if ok else ""

    def open_file(self, title: str, start: str = "", filter: str = "Python scripts (*.py);;All files (*)") -> str:
        path, _ = QFileDialog.getOpenFileName(self.parent, title, start, filter)
        return path

    def save_file(self, title: str, start: str = "") -> str:
        # A store file may exist already (a leftover): the launch checks it, so do not ask to overwrite.
        path, _ = QFileDialog.getSaveFileName(self.parent, title, start,
                                              options=QFileDialog.Option.DontConfirmOverwrite)
        return path

    def folder(self, title: str, start: str = "") -> str:
        return QFileDialog.getExistingDirectory(self.parent, title, start)


class ScriptedDialogs:
    """Answers given in advance (tests, benchmarks); records what was asked."""

    def __init__(self, yes: bool = True, paths: list[str] | None = None, texts: list[str] | None = None) -> None:
        self.yes, self.paths, self.texts = yes, list(paths or []), list(texts or [])
        self.asked: list[tuple[str, str]] = []
        self.filters: list[str] = []  # what each open-file question listed, when it said

    def ask_yes_no(self, title: str, text: str, yes: str = "Yes", no: str = "No") -> bool:
        self.asked.append((title, text))
        return self.yes

    def info(self, title: str, text: str) -> None:
        self.asked.append((title, text))

    def ask_text(self, title: str, label: str, text: str = "") -> str:
        self.asked.append((title, label))
        return self.texts.pop(0) if self.texts else ""

    def error(self, title: str, text: str, details: str = "") -> None:
        self.asked.append((title, text))

    def _path(self, title: str, *_args) -> str:
        self.asked.append((title, ""))
        return self.paths.pop(0) if self.paths else ""

    def open_file(self, title: str, start: str = "", filter: str = "") -> str:
        self.filters += [filter] if filter else []
        return self._path(title, start)

    save_file = folder = _path
