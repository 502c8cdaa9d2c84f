"""The setup form's script style offer: spawn style for a script that starts its own ranks, said in one line.

When the chosen script calls ``mp.spawn`` or its arguments contain
``--multiprocessing-distributed`` (core/scriptstyle.py), the form switches a
script workload to spawn style and says why; choosing another kind afterwards
overrides it for that script and arguments. A spawn call that the arguments
leave off (ImageNet's ``--multiprocessing-distributed`` not given) is said
too, as the reason for one process per rank, and undoes a switch of ours. The distributed-arguments template
follows the style while the user has not edited it (args: per rank; spawn:
the blog's node-level ``--world-size 1 --rank 0``).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit

from ddpstudio.core import cmdline
from ddpstudio.core.plan import DEFAULT_DIST_ARGS, DEFAULT_SPAWN_ARGS
from ddpstudio.core.platform import Platform
from ddpstudio.core.scriptstyle import StyleSuggestion, read_source, suggest_style
from ddpstudio.gui.form_state import STYLE_WORKLOADS
from ddpstudio.gui.path_edit import PathEdit

SPAWN = STYLE_WORKLOADS["spawn"]
SCRIPT_KINDS = frozenset(STYLE_WORKLOADS.values())
TEMPLATES = {STYLE_WORKLOADS["args"]: DEFAULT_DIST_ARGS, SPAWN: DEFAULT_SPAWN_ARGS}


class StyleOffer(QObject):
    def __init__(self, workload: QComboBox, script: PathEdit, script_args: QLineEdit, dist_args: QLineEdit,
                 platform: Platform | None = None) -> None:
        super().__init__(workload)
        self.platform = platform  # the script arguments are split by its rules (core/cmdline.py)
        self.workload, self.script, self.script_args, self.dist_args = workload, script, script_args, dist_args
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setAccessibleName("Script style")
        self.note.hide()
        self.suggestion: StyleSuggestion | None = None
        self._declined: tuple[str, str] | None = None  # (script, arguments) the user chose another kind for
        self._switched = False  # spawn style is our choice, not the user's
        self._kind = workload.currentData()
        script.text_changed.connect(self.check)
        script_args.textChanged.connect(self.check)
        workload.activated.connect(self._user_chose)  # the user's pick only, not set_state's
        workload.currentIndexChanged.connect(self._kind_changed)

    def sync(self) -> None:
        """After the form was filled without signals: what the script suggests, shown, nothing switched."""
        self._kind = self.workload.currentData()
        self._declined = self._key()
        self._switched = False
        self.check()

    def _key(self) -> tuple[str, str]:
        return self.script.text().strip(), self.script_args.text()

    def check(self, *_args) -> None:
        """Read the script again; switch to spawn style when it needs it and the user has not said otherwise."""
        try:
            args = cmdline.split(self.script_args.text(), self.platform)
        except ValueError:
            args = []
        path = self.script.text().strip()
        self.suggestion = suggest_style(read_source(path), args) if path else None
        kind = self.workload.currentData()
        spawns = self.suggestion is not None and self.suggestion.spawns
        if spawns and kind in SCRIPT_KINDS and kind != SPAWN and self._key() != self._declined:
            self.workload.setCurrentIndex(self.workload.findData(SPAWN))
            self._switched = True
        elif not spawns and kind == SPAWN and self._switched:
            self.workload.setCurrentIndex(self.workload.findData(STYLE_WORKLOADS["args"]))
            self._switched = False
        self._show()

    def _user_chose(self, _index: int) -> None:
        self._switched = False
        if self.suggestion is not None and self.suggestion.spawns and self.workload.currentData() != SPAWN:
            self._declined = self._key()
        self._show()

    def _kind_changed(self, _index: int) -> None:
        """The template follows the kind unless the user edited it."""
        kind = self.workload.currentData()
        if self.dist_args.text() == TEMPLATES.get(self._kind) and kind in TEMPLATES:
            self.dist_args.setText(TEMPLATES[kind])
        self._kind = kind
        self._show()

    def _show(self) -> None:
        kind = self.workload.currentData()
        if self.suggestion is None or kind not in SCRIPT_KINDS:
            self.note.hide()
            return
        why = self.suggestion.why
        if not self.suggestion.spawns:
            self.note.setText(f"One process per rank: {why}.")
            self.note.show()
            return
        self.note.setText(f"Spawn style chosen: {why}. Choose another kind to override." if kind == SPAWN else
                          f"Spawn style suggested: {why}.")
        self.note.show()
