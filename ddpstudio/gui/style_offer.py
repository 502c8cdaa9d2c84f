"""The setup form's script style offer: the style a script needs, chosen and said in one line.

When the chosen script calls ``mp.spawn`` or its arguments contain
``--multiprocessing-distributed`` (core/scriptstyle.py), the form switches a
script workload to spawn style and says why; a script written for torchrun
(it reads ``LOCAL_RANK``, or joins by ``env://``) gets torchrun style the same
way. Choosing another kind afterwards overrides it for that script and
arguments. A spawn call that the arguments
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

SPAWN, ARGS = STYLE_WORKLOADS["spawn"], STYLE_WORKLOADS["args"]
NAMES = {"spawn": "Spawn style", "env": "Torchrun style"}  # the styles a suggestion switches to
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
        script.text_changed.connect(self.check)
        script_args.textChanged.connect(self.check)
        workload.activated.connect(self._user_chose)  # the user's pick only, not set_state's
        workload.currentIndexChanged.connect(self._kind_changed)

    def sync(self) -> None:
        """After the form was filled without signals: what the script suggests, shown, nothing switched."""
        self._declined = self._key()
        self._switched = False
        self.check()

    def _key(self) -> tuple[str, str]:
        return self.script.text().strip(), self.script_args.text()

    def check(self, *_args) -> None:
        """Read the script again; switch to the style it needs (spawn, env) unless the user has said otherwise."""
        try:
            args = cmdline.split(self.script_args.text(), self.platform)
        except ValueError:
            args = []
        path = self.script.text().strip()
        self.suggestion = suggest_style(read_source(path), args, path) if path else None
        kind, target, declined = self.workload.currentData(), self._target(), self._key() == self._declined
        if target is not None and kind in SCRIPT_KINDS and kind != target and not declined:
            self.workload.setCurrentIndex(self.workload.findData(target))
            self._switched = True
        elif self._switched and kind != ARGS and (target is None or declined):  # our switch, for another script
            self.workload.setCurrentIndex(self.workload.findData(ARGS))
            self._switched = False
        self._show()

    def _target(self) -> str | None:
        """The kind the suggestion switches to: spawn or env; None for args (the default) or no suggestion."""
        style = self.suggestion.style if self.suggestion is not None else None
        return STYLE_WORKLOADS[style] if style in NAMES else None

    def _user_chose(self, _index: int) -> None:
        self._switched = False
        target = self._target()
        if target is not None and self.workload.currentData() != target:
            self._declined = self._key()
        self._show()

    def _kind_changed(self, _index: int) -> None:
        """The template follows the kind unless the user edited it (env style has none: the text stays)."""
        kind = self.workload.currentData()
        if kind in TEMPLATES and self.dist_args.text() in TEMPLATES.values():
            self.dist_args.setText(TEMPLATES[kind])
        self._show()

    def _show(self) -> None:
        kind = self.workload.currentData()
        if self.suggestion is None or kind not in SCRIPT_KINDS:
            self.note.hide()
            return
        why, target = self.suggestion.why, self._target()
        if target is None:
            self.note.setText(f"One process per rank: {why}.")
        else:
            name = NAMES[self.suggestion.style]
            self.note.setText(f"{name} chosen: {why}. Choose another kind to override." if kind == target else
                              f"{name} suggested: {why}.")
        self.note.show()
