"""A word-wrapped label that is always as tall as its text needs at its width.

Qt lays a wrapped QLabel out at its size hint's height wherever height-for-width does not reach it (a box
with its own alignment, a form inside a scroll area whose text changed while shown): a long problem under a
field, a path in it, was cut off at the top and bottom (seen in the setup form's Python field). This label
keeps its minimum height at ``heightForWidth`` of its current width, which every layout respects.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel


class FittedLabel(QLabel):
    def __init__(self, text: str = "", parent=None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setText(text)
        self._fit()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        needed = self.heightForWidth(self.width()) if self.width() > 0 else -1
        if needed > 0 and needed != self.minimumHeight():
            self.setMinimumHeight(needed)
