"""Tooltips at a readable width (issue 24: the store and batch-mode tooltips ran 1,100 px across the plots).

Qt word-wraps a tooltip only when it is rich text or wider than the screen
(qtooltip.cpp, ``QTipLabel::updateSize``: ``setWordWrap(Qt::mightBeRichText(text()))``),
and a word-wrapped label is at most 80 average characters wide
(qlabel.cpp, ``QLabelPrivate::sizeForWidth``). So a long plain tooltip is shown
as escaped rich text, which wraps; the widget's ``toolTip()`` stays as written.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import Qt  # QtGui's Qt namespace carries mightBeRichText
from PySide6.QtWidgets import QAbstractScrollArea, QToolTip, QWidget

WRAP_CHARS = 80  # Qt's own width for word-wrapped labels


def readable(text: str) -> str:
    """``text`` as Qt will wrap it: rich text for a long plain tooltip, else unchanged."""
    if not text or Qt.mightBeRichText(text) or max(len(line) for line in text.splitlines()) <= WRAP_CHARS:
        return text
    return "<qt>" + html.escape(text, quote=False).replace("\n", "<br>") + "</qt>"


class ReadableTips(QObject):
    """An event filter for the window's widgets: their tooltips are shown wrapped (see the module)."""

    def watch(self, root: QWidget) -> None:
        """Every widget under ``root``, except scroll areas and plots, whose every mouse move would pass here."""
        for widget in (root, *root.findChildren(QWidget)):
            if not isinstance(widget, QAbstractScrollArea) and widget.objectName() != "qt_scrollarea_viewport":
                widget.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.ToolTip and isinstance(watched, QWidget):
            text = watched.toolTip()
            shown = readable(text)
            if shown != text:
                QToolTip.showText(event.globalPos(), shown, watched)
                return True
        return False
