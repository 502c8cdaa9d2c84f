"""The multi-machine panel above the plots: the join code (hidden until asked, with Copy), where the run
meets (address, port or shared store file, adapter and why it was chosen), the layout, the masked token,
who we wait for, and on the host every node: its address, its ranks and its state.

A view only: :class:`~ddpstudio.gui.node_flow.NodeFlow` fills it from the host's ``join_code``
event (or, on a joining machine, from the pasted code) and from the run's state.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from ddpstudio.core.nodes.joincode import JoinCode, mask
from ddpstudio.core.nodes.link import NodeState
from ddpstudio.gui.progress_view import STATE_TEXT

PANEL_STYLE = "QFrame#nodePanel { background: #EAF2FB; border: 1px solid #9CBEE6; border-radius: 3px; }"


def layout_text(code: JoinCode) -> str:
    return (f"{code.nodes} machines × {code.ranks_per_node} rank{'s' if code.ranks_per_node != 1 else ''} "
            f"= {code.world_size} ranks")


NODE_STATE_TEXT = {NodeState.WAITING: "waiting", NodeState.JOINED: "joined", NodeState.TRAINING: "training",
                   NodeState.FINISHED: "finished", NodeState.FAILED: "failed", NodeState.STOPPED: "stopped"}
RUN_TO_NODE = {"running": NodeState.TRAINING, "finished": NodeState.FINISHED, "failed": NodeState.FAILED,
               "stopped": NodeState.STOPPED}  # the host's own node follows its run


def span(node: int, per_node: int) -> str:
    first = node * per_node
    return f"rank {first}" if per_node == 1 else f"ranks {first}-{first + per_node - 1}"


def meets_at(code: JoinCode) -> str:
    return f"store file {code.store_path}" if code.store_path else f"{code.addresses[0]} port {code.port}"


def waiting_text(nodes_missing: int) -> str:
    return f"Waiting for {nodes_missing} machine{'s' if nodes_missing != 1 else ''} to join…"


class NodePanel(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("nodePanel")
        self.setStyleSheet(PANEL_STYLE)
        self.setAccessibleName("Multi-machine run")
        self.brief = ""  # one line for the panel once training runs
        self.missing = 0  # machines the host still waits for
        self.code = ""  # the whole join code (holds the token): only the clipboard and the Show button see it
        self.per_node = 1
        self.nodes: dict[int, tuple[str, NodeState]] = {}  # the host's view: node rank -> (address, state)
        self.node_list = QLabel()
        self.node_list.setAccessibleName("Machines of the run")
        self.node_list.setTextFormat(Qt.TextFormat.RichText)
        self.title = QLabel()
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.state = QLabel()
        self.details = QLabel()
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.RichText)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.code_edit = QLineEdit()
        self.code_edit.setReadOnly(True)
        self.code_edit.setAccessibleName("Join code")
        self.code_edit.setEchoMode(QLineEdit.EchoMode.Password)  # a screen share or a screenshot keeps the secret
        self.show_button = QPushButton("Show")
        self.show_button.setCheckable(True)
        self.show_button.toggled.connect(self._reveal)
        self.copy_button = QPushButton("Copy join code")
        self.copy_button.clicked.connect(self.copy)
        code_row = QHBoxLayout()
        code_row.addWidget(QLabel("Join code:"))
        code_row.addWidget(self.code_edit, 1)
        code_row.addWidget(self.show_button)
        code_row.addWidget(self.copy_button)
        self.code_row = QWidget()
        self.code_row.setLayout(code_row)
        code_row.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        head.addWidget(self.title, 1)
        head.addWidget(self.state)
        layout = QVBoxLayout(self)
        layout.addLayout(head)
        layout.addWidget(self.code_row)
        layout.addWidget(self.details)
        layout.addWidget(self.node_list)
        self.hide()

    def show_host(self, code_text: str, code: JoinCode, adapter: str, reason: str) -> None:
        """The host's view: the code to hand out and how the others will reach this machine."""
        self.code = code_text
        self.code_edit.setText(code_text)
        self.show_button.setChecked(False)
        self.title.setText(f"Hosting run {code.run_id} on {code.nodes} machines")
        others = f" (also {', '.join(code.addresses[1:])})" if len(code.addresses) > 1 else ""
        self._details([("Meets at", f"{meets_at(code)}{others}"),
                       ("Network adapter", reason or adapter),
                       ("Layout", layout_text(code)),
                       ("Token", f"{mask(code.token)}, in the code only; share the code only with this run's machines"),
                       ("On each other machine", "Run ▸ Join a run… and paste the code, or "
                                                 "<code>ddpstudio join -</code> and paste it on stdin")])
        self.code_row.show()
        self.details.show()
        where = code.store_path if code.store_path else f"{code.addresses[0]}:{code.port}"
        self.brief = f"{layout_text(code)}; meets at {where} through {adapter or code.addresses[0]}"
        self.per_node = code.ranks_per_node
        self.nodes = {0: (f"this machine ({code.addresses[0]})", NodeState.JOINED),
                      **{n: ("", NodeState.WAITING) for n in range(1, code.nodes)}}
        self._show_nodes()
        self.set_waiting(code.nodes - 1)
        self.show()

    def show_join(self, code: JoinCode) -> None:
        """A joining machine's view: what it joined (the code itself is not shown again)."""
        self.code = ""
        self.code_row.hide()
        self.nodes = {}
        self.node_list.hide()
        self.title.setText(f"Joining run {code.run_id}")
        host = f"{', '.join(code.addresses)}" + (f", store file {code.store_path}" if code.store_path
                                                  else f" port {code.port}")
        self._details([("Host", host), ("Layout", layout_text(code)),
                       ("Token", mask(code.token))])
        self.details.show()
        self.brief = f"{layout_text(code)}; hosted at {code.addresses[0]}" + (
            f", store file {code.store_path}" if code.store_path else f":{code.port}")
        self.state.setText("Asking the host to join…")
        self.show()

    def set_waiting(self, missing: int) -> None:
        self.missing = missing
        self.state.setText(waiting_text(missing) if missing > 0 else "All machines joined: starting the ranks…")

    def node_joined(self) -> None:
        self.set_waiting(max(0, self.missing - 1))

    def set_node(self, node: int, label: str, state: str) -> None:
        """Another node's news (the node launcher's ``node_news``): its address and new state."""
        if node not in self.nodes or state not in NODE_STATE_TEXT:
            return
        address, _old = self.nodes[node]
        self.nodes[node] = (label or address, NodeState(state))
        self._show_nodes()

    def _show_nodes(self) -> None:
        rows = [f"<b>Node {n}</b>: {escape(address or 'not joined yet')}, {span(n, self.per_node)}: "
                f"{NODE_STATE_TEXT[state]}" for n, (address, state) in sorted(self.nodes.items())]
        self.node_list.setText("<br>".join(rows))
        self.node_list.setVisible(bool(rows))

    def set_run_state(self, state: str) -> None:
        """The run's state once every machine is in (or it ended)."""
        if 0 in self.nodes and state in RUN_TO_NODE:
            self.nodes[0] = (self.nodes[0][0], RUN_TO_NODE[state])
            self._show_nodes()
        if state == "running":  # the code has done its job: the plots get the room
            self.state.setText("All machines joined: training")
            self.code_row.hide()
            self.details.setText(escape(self.brief))
        elif state in STATE_TEXT and state != "starting":
            self.state.setText(STATE_TEXT[state])

    def copy(self) -> None:
        if self.code:
            QGuiApplication.clipboard().setText(self.code)
            self.copy_button.setText("Copied")

    def _reveal(self, shown: bool) -> None:
        self.code_edit.setEchoMode(QLineEdit.EchoMode.Normal if shown else QLineEdit.EchoMode.Password)
        self.show_button.setText("Hide" if shown else "Show")

    def _details(self, rows: list[tuple[str, str]]) -> None:
        # Values are ours or the code's; only the hint row carries markup.
        self.details.setText("<br>".join(f"<b>{escape(k)}:</b> {v if '<code>' in v else escape(v)}"
                                         for k, v in rows))

    def text(self) -> str:
        """What the panel says, as plain text (tests); never the whole code."""
        return "\n".join((self.title.text(), self.state.text(), self.details.text(), self.node_list.text()))
