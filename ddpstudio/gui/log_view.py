"""The merged rank logs with a per-rank filter, a search field and Save; every line timestamped.

Lines arrive thousands a second at worst; they are kept in a bounded deque
and appended to the text view in one batch per render tick (``flush``), so
the view never redraws per line. Changing the filter rebuilds from the deque.
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

from PySide6.QtGui import QFontDatabase, QTextCursor
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit, QPushButton, QVBoxLayout,
                               QWidget)

KEEP_LINES = 20000
SHOW_LINES = 5000
ALL, LAUNCHER = "all", "launcher"


def format_line(rank: int | None, stream: str, line: str, t: float | None = None) -> str:
    who = f"rank {rank}" if rank is not None else "studio" if stream == "studio" else "launcher"
    tag = "" if stream in ("stdout", "studio", "launcher", "recipe") else f" {stream}"
    stamp = time.strftime("%H:%M:%S ", time.localtime(t)) if t is not None else ""
    return f"{stamp}[{who}{tag}] {line}"


class LogView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.dialogs = None  # the window sets it: Save asks for a file name through it
        self.lines: deque[tuple[int | None, str, str, float]] = deque(maxlen=KEEP_LINES)
        self._pending: list[str] = []
        self.filter = QComboBox()
        self.filter.setAccessibleName("Show the log of")
        self.filter.addItem("All ranks", ALL)
        self.filter.addItem("Launcher and studio", LAUNCHER)
        self.filter.currentIndexChanged.connect(self._rebuild)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setMaximumBlockCount(SHOW_LINES)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search the log")
        self.search.setAccessibleName("Search the log")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._rebuild)
        self.save_button = QPushButton("Save…")
        self.save_button.setToolTip("Save the whole log (every rank, with times) to a text file")
        self.save_button.clicked.connect(self.save)
        label = QLabel("Show:")
        label.setBuddy(self.filter)
        top = QHBoxLayout()
        top.addWidget(label)
        top.addWidget(self.filter)
        top.addWidget(self.search, 1)
        top.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.text)

    # -- feeding ---------------------------------------------------------------
    def clear(self) -> None:
        self.lines.clear()
        self._pending.clear()
        self.text.clear()
        while self.filter.count() > 2:
            self.filter.removeItem(2)

    def append(self, rank: int | None, stream: str, line: str, t: float | None = None) -> None:
        entry = (rank, stream, line, time.time() if t is None else t)
        self.lines.append(entry)
        if rank is not None and self.filter.findData(rank) < 0:
            self.filter.addItem(f"Rank {rank}", rank)
        if self._shows(entry):
            self._pending.append(format_line(*entry))

    def extend(self, lines) -> None:
        """Lines as (rank, stream, line) or (rank, stream, line, t) (a reopened run's logs)."""
        for entry in lines:
            self.append(*entry)

    def _shows(self, entry: tuple) -> bool:
        rank, wanted, needle = entry[0], self.filter.currentData(), self.search.text().strip().lower()
        if needle and needle not in entry[2].lower():
            return False
        return wanted == ALL or (wanted == LAUNCHER and rank is None) or wanted == rank

    def flush(self) -> bool:
        """Append what arrived since the last call (called by the render timer)."""
        if not self._pending:
            return False
        pending, self._pending = self._pending[-SHOW_LINES:], []
        bar = self.text.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 2
        self.text.appendPlainText("\n".join(pending))
        if at_end:
            self.text.moveCursor(QTextCursor.MoveOperation.End)
            bar.setValue(bar.maximum())
        return True

    def _rebuild(self) -> None:
        self.text.clear()
        self._pending = [format_line(*entry) for entry in self.lines if self._shows(entry)]
        self.flush()

    def save(self) -> Path | None:
        """Write every kept line (all ranks, unfiltered) to a file the user names; None if cancelled."""
        if self.dialogs is None:
            return None
        path = self.dialogs.save_file("Save the log", "ddpstudio-run.log")
        if not path:
            return None
        try:
            Path(path).write_text("\n".join(format_line(*e) for e in self.lines) + "\n", encoding="utf-8")
        except OSError as exc:
            self.dialogs.error("Could not save the log", str(exc))
            return None
        return Path(path)

    def shown_text(self) -> str:
        return self.text.toPlainText()
