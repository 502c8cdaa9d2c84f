"""The window's actions (Launch, Stop, Clean up, Quit), its menu bar, and buttons that mirror actions."""

from __future__ import annotations

from typing import Callable

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QPushButton, QStyle

from ddpstudio import __version__
from ddpstudio.core import paths


class WindowActions:
    """Builds the actions and menus once; the window connects them and enables them."""

    def __init__(self, window: QMainWindow, *, launch: Callable, stop: Callable, cleanup: Callable,
                 open_log_folder: Callable, about: Callable) -> None:
        self.window = window
        SP = QStyle.StandardPixmap
        self.launch = self._action("&Launch", "F5", SP.SP_MediaPlay, launch)
        self.stop = self._action("&Stop", "Shift+F5", SP.SP_MediaStop, stop)
        self.cleanup = self._action("Clea&n up…", "Ctrl+Shift+K", SP.SP_TrashIcon, cleanup)
        self.quit = self._action("&Quit", QKeySequence.StandardKey.Quit, SP.SP_DialogCloseButton, window.close)
        menu = window.menuBar()
        menu.addMenu("&File").addAction(self.quit)
        self.run_menu = run_menu = menu.addMenu("&Run")  # the multi-machine actions join it (node_flow)
        for action in (self.launch, self.stop, self.cleanup):
            run_menu.addAction(action)
        self.view_menu = menu.addMenu("&View")
        help_menu = menu.addMenu("&Help")
        help_menu.addAction("Open the &log folder", open_log_folder)
        help_menu.addAction("&About DDP Studio", about)

    def _action(self, text: str, shortcut, icon: QStyle.StandardPixmap, slot) -> QAction:
        action = QAction(self.window.style().standardIcon(icon), text, self.window)
        action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        return action

    def add_tab_shortcuts(self, names, select: Callable[[int], None]) -> None:
        """View menu entries Ctrl+1, Ctrl+2, ... one per tab."""
        for i, name in enumerate(names):
            self.view_menu.addAction(name, QKeySequence(f"Ctrl+{i + 1}"), lambda i=i: select(i))

    @staticmethod
    def button(action: QAction) -> QPushButton:
        """A push button that triggers ``action`` and follows its enabled state."""
        button = QPushButton(action.icon(), action.text())
        shortcut = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        button.setToolTip(f"{action.text().replace('&', '')} ({shortcut})")
        button.clicked.connect(action.trigger)
        action.changed.connect(lambda: button.setEnabled(action.isEnabled()))
        return button


def about(dialogs) -> None:
    dialogs.info("About DDP Studio", f"DDP Studio {__version__}\nPoint-and-click PyTorch DDP training.\n"
                                     f"Runs are kept in {paths.runs_dir()}")
