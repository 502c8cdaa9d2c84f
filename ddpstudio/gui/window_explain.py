"""The window explaining itself: wires the parts that tell the user what is going on.

Launch's reasons (``launch_gate``), the CLI's lines in the Log tab
(``run_narrator``), presets above the form, "Copy as command", Help links to
the docs, and the file dialogs the plots and the log export through.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication, QKeySequence

from ddpstudio.gui.command_line import command_line
from ddpstudio.gui.launch_gate import LaunchGate
from ddpstudio.gui.presets import PresetBar, Presets
from ddpstudio.gui.run_narrator import RunNarrator

DOCS = (("&README: getting started", "README.md"), ("The &window", "docs/gui.md"),
        ("The &scaling benchmark", "docs/bench.md"), ("&GPUs and backends", "docs/gpu.md"),
        ("&Stores and rendezvous", "docs/stores.md"), ("&Cleaning up", "docs/cleanup.md"),
        ("The event &protocol", "docs/protocol.md"), ("&Installing", "docs/install.md"))


def doc_path(relative: str) -> Path | None:
    """The document beside the package (a checkout or an install that ships docs/), or None."""
    local = Path(__file__).resolve().parents[2] / relative
    return local if local.is_file() else None


class WindowExplainer:
    def __init__(self, window) -> None:
        self.window = w = window
        w.plots.dialogs = w.log_view.dialogs = w.dialogs
        self.gate = LaunchGate(w)
        self.narrator = RunNarrator(lambda line: w.log_view.append(None, "studio", line))
        for signal in (w.controller.run_started, w.controller.metrics_received, w.controller.run_finished):
            signal.connect(self.narrator.feed)
        w.bench.bench_progress.connect(w.progress.show_bench)
        w.bench.bench_finished.connect(lambda _result: w.progress.show_bench(None))
        self.presets = Presets(w.settings)
        self.preset_bar = PresetBar(self.presets, w.form, w.dialogs)
        w.form.layout().insertWidget(0, self.preset_bar)
        menu = w.menuBar().actions()[1].menu()  # Run
        self.copy_action = menu.addAction("&Copy as command", QKeySequence("Ctrl+Shift+C"), self.copy_command)
        self.copy_action.setToolTip("Put the equivalent 'ddpstudio run ...' line on the clipboard")
        help_menu = w.menuBar().actions()[-1].menu()
        help_menu.addSeparator()
        found = [(text, path) for text, relative in DOCS if (path := doc_path(relative)) is not None]
        for text, path in found:
            help_menu.addAction(text, lambda path=path: QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))))
        if not found:
            help_menu.addAction("(the documentation is not installed here)").setEnabled(False)

    def copy_command(self) -> str:
        w = self.window
        try:
            line = command_line(w.form.state(), w.platform)
        except ValueError as exc:
            w.statusBar().showMessage(f"Cannot copy the command: {exc}", 10000)
            return ""
        QGuiApplication.clipboard().setText(line)
        w.statusBar().showMessage(f"Copied: {line}", 10000)
        return line
