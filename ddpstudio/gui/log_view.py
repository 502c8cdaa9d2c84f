"""The merged rank logs with a per-rank filter.

Lines arrive thousands a second at worst; they are kept in a bounded deque
and appended to the text view in one batch per render tick (``flush``), so
the view never redraws per line. Changing the filter rebuilds from the deque.
"""

from __future__ import annotations

from collections import deque

from PySide6.QtGui import QFontDatabase, QTextCursor
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

KEEP_LINES = 20000
SHOW_LINES = 5000
ALL, LAUNCHER = "all", "launcher"


def format_line(rank: int | None, stream: str, line: str) -> str:
    who = f"rank {rank}" if rank is not None else "studio" if stream == "studio" else "launcher"
    tag = "" if stream in ("stdout", "studio", "launcher", "recipe") else f" {stream}"
    return f"[{who}{tag}] {line}"


class LogView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lines: deque[tuple[int | None, str, str]] = deque(maxlen=KEEP_LINES)
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
        label = QLabel("Show:")
        label.setBuddy(self.filter)
        top = QHBoxLayout()
        top.addWidget(label)
        top.addWidget(self.filter)
        top.addStretch(1)
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

    def append(self, rank: int | None, stream: str, line: str) -> None:
        self.lines.append((rank, stream, line))
        if rank is not None and self.filter.findData(rank) < 0:
            self.filter.addItem(f"Rank {rank}", rank)
        if self._shows(rank):
            self._pending.append(format_line(rank, stream, line))

    def extend(self, lines) -> None:
        for rank, stream, line in lines:
            self.append(rank, stream, line)

    def _shows(self, rank: int | None) -> bool:
        wanted = self.filter.currentData()
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
        self._pending = [format_line(*entry) for entry in self.lines if self._shows(entry[0])]
        self.flush()

    def shown_text(self) -> str:
        return self.text.toPlainText()
