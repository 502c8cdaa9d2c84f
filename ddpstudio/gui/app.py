"""``ddpstudio`` with no arguments: the application object, the exception hook, the main window."""

from __future__ import annotations

import sys

from ddpstudio.core.platform import Platform, current

APP_USER_MODEL_ID = "DDPStudio.DDPStudio"


def _windows_taskbar_identity(platform: Platform) -> None:
    """Without its own AppUserModelID a python(w).exe app shows Python's icon in the taskbar."""
    if platform.is_windows:
        import ctypes

        try:
            ctypes.windll.shell32.SetCurrentProcessExplicitAppUserModelID(APP_USER_MODEL_ID)  # type: ignore[attr-defined]
        except (AttributeError, OSError):
            pass


def main(argv: list[str] | None = None) -> int:
    from PySide6.QtWidgets import QApplication

    from ddpstudio import __version__
    from ddpstudio.gui.dialogs import Dialogs
    from ddpstudio.gui.excepthook import ExceptionHook
    from ddpstudio.gui.icon import app_icon

    platform = current()
    _windows_taskbar_identity(platform)
    app = QApplication.instance() or QApplication(sys.argv if argv is None else argv)
    app.setApplicationName("DDP Studio")
    app.setApplicationDisplayName("DDP Studio")
    app.setApplicationVersion(__version__)
    app.setOrganizationName("DDPStudio")
    app.setWindowIcon(app_icon())
    dialogs = Dialogs()
    hook = ExceptionHook(dialogs)
    hook.install()
    try:
        from ddpstudio.gui.mainwindow import MainWindow  # pyqtgraph loads here, after the hook is in place

        window = MainWindow(dialogs=dialogs, platform=platform)
        dialogs.parent = window
        window.show()
        return app.exec()
    finally:
        hook.uninstall()


if __name__ == "__main__":
    sys.exit(main())
