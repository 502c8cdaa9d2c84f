"""The window's left column: the machine panel and the run setup (scrolling), with the action buttons below."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QScrollArea, QVBoxLayout, QWidget

from ddpstudio.gui.machine_panel import MachinePanel
from ddpstudio.gui.setup_form import SetupForm


class SetupColumn(QWidget):
    def __init__(self, machine_panel: MachinePanel, form: SetupForm, buttons: list[QPushButton],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        column = QWidget()
        column_layout = QVBoxLayout(column)
        column_layout.addWidget(machine_panel)
        column_layout.addWidget(form, 1)
        scroll = QScrollArea()
        scroll.setWidget(column)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(column.minimumSizeHint().width() + scroll.verticalScrollBar().sizeHint().width()
                               + 2 * scroll.frameWidth())
        row = QHBoxLayout()
        for button in buttons:
            row.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll, 1)
        layout.addLayout(row)
