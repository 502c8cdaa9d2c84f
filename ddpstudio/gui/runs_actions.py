"""What the Runs tab does to runs' files: delete them (after asking) and export one (CSV, TensorBoard).

Questions and file choices go through the window's ``Dialogs`` seam; the
work itself (``core.metrics.catalog`` / ``core.metrics.export``) runs on a
worker, and the outcome is said in one line (``done`` carries it, for the
status bar and tests).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from ddpstudio.cli.runs import format_size
from ddpstudio.core.metrics import catalog, export
from ddpstudio.core.metrics.history import read_history
from ddpstudio.gui.workers import Workers


def _export(run_dir: str, kind: str, target: str) -> str:
    history = read_history(run_dir)
    if not history.tracks:
        raise catalog.RunsError(f"run {Path(run_dir).name} measured nothing yet")
    if kind == "csv":
        return f"{export.write_csv(history, target)} rows written to {target}"
    return f"{export.write_tensorboard(history, target)} scalars written to {target}"


class RunsActions(QObject):
    done = Signal(str)  # what happened, in words
    failed = Signal(str)

    def __init__(self, workers: Workers, dialogs, on_changed, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.workers, self.dialogs, self.on_changed = workers, dialogs, on_changed

    @Slot(list)
    def delete(self, run_dirs: list[str]) -> None:
        if not run_dirs:
            return
        names = [Path(d).name for d in run_dirs]
        size = sum(catalog.folder_size(Path(d)) for d in run_dirs)
        shown = "\n".join(names[:10]) + (f"\n... and {len(names) - 10} more" if len(names) > 10 else "")
        if not self.dialogs.ask_yes_no("Delete runs", f"Delete {len(names)} run(s) and {format_size(size)} of "
                                       f"files (curves, logs, plan, record)? This cannot be undone.\n\n{shown}",
                                       yes="Delete", no="Keep"):
            return
        root = Path(run_dirs[0]).parent
        self.workers.submit(lambda: catalog.delete_runs(names, root), self._deleted,
                            lambda text: self._failed("Delete runs", text))

    @Slot(object)
    def _deleted(self, folders: list[str]) -> None:
        self.on_changed()
        self.done.emit(f"Deleted {len(folders)} run(s)")

    @Slot(str, str)
    def export(self, run_dir: str, kind: str) -> None:
        name = Path(run_dir).name
        if kind == "csv":
            target = self.dialogs.save_file("Export the run's curves as CSV", f"{name}.csv")
        else:
            target = self.dialogs.folder("Folder for the TensorBoard event files", "")
            if target:
                target = str(Path(target) / name)
        if not target:
            return
        self.workers.submit(lambda: _export(run_dir, kind, target), self.done.emit,
                            lambda text: self._failed("Export", text))

    def _failed(self, title: str, text: str) -> None:
        message = text.strip().splitlines()[-1] if text.strip() else "failed"
        message = message.split(": ", 1)[1] if message.startswith("ddpstudio.") else message
        self.dialogs.error(title, message, text)
        self.failed.emit(message)
