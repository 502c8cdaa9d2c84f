"""The two multi-machine dialogs: "Host a multi-machine run…" (how many machines, ranks on each, the
adapter) and "Join a run…" (paste the code; it is read as you type, and what it joins is shown before
anything starts). Both are non-modal QDialogs that emit their answer, so tests drive them as users do."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit,
                               QPlainTextEdit, QSpinBox, QVBoxLayout, QWidget)

from ddpstudio.core.nodes import joincode
from ddpstudio.gui.node_commands import HostRequest
from ddpstudio.gui.node_panel import layout_text

CHOSEN_FOR_YOU = "chosen for you (the LAN adapter; never loopback, VPN or virtual ones)"
ERROR_STYLE = "color: #c62828;"


def local_adapters() -> list[tuple[str, str]]:
    """(name, address) of this machine's IPv4 adapters that are up, for the override list."""
    import psutil

    from ddpstudio.core.nodes.adapter import adapters

    return [(a.name, a.address) for a in adapters(psutil.net_if_addrs(), psutil.net_if_stats()) if a.up]


class HostDialog(QDialog):
    chosen = Signal(object)  # HostRequest

    def __init__(self, summary: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Host a multi-machine run")
        self.nodes = QSpinBox()
        self.nodes.setRange(2, 64)
        self.ranks = QSpinBox()
        self.ranks.setRange(0, 64)
        self.ranks.setSpecialValueText("auto (one per GPU; 2 on the CPU)")
        self.adapter = QComboBox()
        self.adapter.addItem(CHOSEN_FOR_YOU, "")
        for name, address in local_adapters():
            self.adapter.addItem(f"{name} ({address})", name)
        self.store_path = QLineEdit()
        self.store_path.setPlaceholderText("optional: \\\\server\\share\\pg to meet at a file on a shared folder")
        self.store_path.setToolTip("Leave empty to meet at this machine's port. A store file on a folder every "
                                   "machine can write to (the PyTorch-on-Windows blog's way): docs/multi-machine.md")
        intro = QLabel(f"Trains the setup on the left ({summary}) on several machines of this LAN. "
                       "You get a join code to paste on each other machine; training starts when all "
                       "have joined. Trusted LAN only: the rendezvous store has no authentication.")
        intro.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Machines (this one included)", self.nodes)
        form.addRow("Ranks on each machine", self.ranks)
        form.addRow("Network adapter", self.adapter)
        form.addRow("Shared folder store file", self.store_path)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.host_button = buttons.addButton("Host", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(buttons)

    def request(self) -> HostRequest:
        return HostRequest(nodes=self.nodes.value(), ranks_per_node=self.ranks.value(),
                           ifname=str(self.adapter.currentData() or ""), store_path=self.store_path.text().strip())

    def accept(self) -> None:
        super().accept()
        self.chosen.emit(self.request())


class JoinDialog(QDialog):
    chosen = Signal(str, object)  # the code as pasted, the JoinCode it holds

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Join a run")
        self.code: joincode.JoinCode | None = None
        self.paste = QPlainTextEdit()
        self.paste.setAccessibleName("Join code")
        self.paste.setPlaceholderText("Paste the join code the host shows (it starts with ddps1.)")
        self.paste.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.paste.setMaximumHeight(90)
        self.paste.textChanged.connect(self._read)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.message.setAccessibleName("What the code says")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.join_button = buttons.addButton("Join", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("The host's join code:"))
        layout.addWidget(self.paste)
        layout.addWidget(self.message)
        layout.addWidget(buttons)
        self.resize(560, 260)
        self._read()

    def _read(self) -> None:
        text = self.paste.toPlainText()
        self.code = None
        if not text.strip():
            self._say("", "")
        else:
            try:
                self.code = joincode.decode(text)
            except joincode.JoinCodeError as exc:
                self._say(str(exc)[:1].upper() + str(exc)[1:] + ".", ERROR_STYLE)
            else:
                self._say(self.preview(self.code), "")
        self.join_button.setEnabled(self.code is not None)

    @staticmethod
    def preview(code: joincode.JoinCode) -> str:
        versions = ", ".join(f"{k} {v}" for k, v in sorted(code.versions.items()))
        return (f"Run {code.run_id} hosted at {', '.join(code.addresses)} port {code.port}\n"
                f"{layout_text(code)}; this machine trains {code.ranks_per_node} of them\n"
                f"Token {joincode.mask(code.token)}" + (f"\nHost has {versions}" if versions else ""))

    def _say(self, text: str, style: str) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(style)

    def accept(self) -> None:
        if self.code is None:
            return
        super().accept()
        self.chosen.emit(self.paste.toPlainText(), self.code)
