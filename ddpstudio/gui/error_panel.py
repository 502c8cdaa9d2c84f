"""The error panel: a failed run's root cause, the hint that applies, and what to click next.

Also carries advice while a run trains (low GPU load, ranks waiting for
data), in a milder style, and a stuck rank with a Stop button (issue 25 §3).
Hidden while there is nothing to say.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QStyle, QToolButton,
                               QVBoxLayout, QWidget)

from ddpstudio.core.hints import CLEANUP, Hint


class ErrorPanel(QFrame):
    cleanup_requested = Signal()
    stop_requested = Signal()
    open_folder_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAccessibleName("Error panel")
        self.icon = QLabel()
        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hints = QLabel()
        self.hints.setWordWrap(True)
        self.hints.setTextFormat(Qt.TextFormat.RichText)
        self.hints.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)  # a hint's command line
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.details.setMaximumHeight(140)
        self.details_button = QToolButton()
        self.details_button.setText("Traceback")
        self.details_button.setCheckable(True)
        self.details_button.toggled.connect(self.details.setVisible)
        self.cleanup_button = QPushButton("Clean up…")
        self.cleanup_button.clicked.connect(self.cleanup_requested)
        self.stop_button = QPushButton("Stop the run")
        self.stop_button.setAccessibleName("Stop the run with the stuck rank")
        self.stop_button.clicked.connect(self.stop_requested)
        self.folder_button = QPushButton("Open run folder")
        self.folder_button.clicked.connect(lambda: self.open_folder_requested.emit(self._run_dir))
        close = QToolButton()
        close.setAutoRaise(True)
        close.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_TitleBarCloseButton))
        close.setToolTip("Hide")
        close.setAccessibleName("Hide the error panel")
        close.clicked.connect(self.hide)

        head = QHBoxLayout()
        head.addWidget(self.icon)
        head.addWidget(self.title, 1)
        head.addWidget(close)
        buttons = QHBoxLayout()
        buttons.addWidget(self.details_button)
        buttons.addStretch(1)
        buttons.addWidget(self.cleanup_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.folder_button)
        layout = QVBoxLayout(self)
        layout.addLayout(head)
        layout.addWidget(self.summary)
        layout.addWidget(self.hints)
        layout.addWidget(self.details)
        layout.addLayout(buttons)
        self._run_dir = ""
        self.kind = ""  # "failure" or "advice" while shown
        self.shown_hints: list[Hint] = []
        self.hide()

    def show_failure(self, title: str, summary: str, traceback: list[str] | None = None,
                     hints: list[Hint] | None = None, run_dir: str = "", details_title: str = "Traceback") -> None:
        """A failure (or a run that exited 0 without training): ``traceback`` is the details' text."""
        self._fill("failure", QStyle.StandardPixmap.SP_MessageBoxCritical, title, summary, hints or [], run_dir)
        self.details_button.setText(details_title)
        self.details.setPlainText("\n".join(traceback or []))
        self.details_button.setVisible(bool(traceback))
        self.details_button.setChecked(bool(traceback))
        self.details.setVisible(bool(traceback))

    def show_stuck(self, summary: str, run_dir: str) -> None:
        """A rank holds up the others while the run goes on: what the launcher found, and Stop."""
        self._fill("stuck", QStyle.StandardPixmap.SP_MessageBoxWarning, "A rank is stuck", summary, [], run_dir)
        self.details_button.hide()
        self.details.hide()
        self.stop_button.show()

    def show_advice(self, hint: Hint) -> None:
        if self.kind in ("failure", "stuck") and self.isVisible():
            return
        self._fill("advice", QStyle.StandardPixmap.SP_MessageBoxInformation, hint.title, hint.text, [], "")
        self.details_button.hide()
        self.details.hide()

    def clear(self) -> None:
        self.kind, self.shown_hints = "", []
        self.hide()

    def _fill(self, kind: str, pixmap: QStyle.StandardPixmap, title: str, summary: str, hints: list[Hint],
              run_dir: str) -> None:
        self.kind, self.shown_hints, self._run_dir = kind, list(hints), run_dir
        size = self.style().pixelMetric(QStyle.PixelMetric.PM_SmallIconSize)
        self.icon.setPixmap(self.style().standardIcon(pixmap).pixmap(size, size))
        self.title.setText(title)
        self.summary.setText(summary)
        self.hints.setText("".join(f"<p><b>{escape(h.title)}.</b> {escape(h.text).replace(chr(10), '<br>')}</p>"
                                   for h in hints))  # a line of its own (a command to copy) stays one
        self.hints.setVisible(bool(hints))
        self.cleanup_button.setVisible(any(h.action == CLEANUP for h in hints))
        self.stop_button.hide()
        self.folder_button.setVisible(bool(run_dir))
        self.show()

    def text(self) -> str:
        """Everything the panel says, as plain text (for tests and copy)."""
        hints = " ".join(f"{h.title}. {h.text}" for h in self.shown_hints)
        return "\n".join(t for t in (self.title.text(), self.summary.text(), hints,
                                     self.details.toPlainText()) if t)
