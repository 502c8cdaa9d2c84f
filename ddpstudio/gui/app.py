"""``ddpstudio`` with no arguments: the application object, the exception hook, the main window."""

from __future__ import annotations

import os
import sys

from ddpstudio.core.platform import Platform, current

APP_USER_MODEL_ID = "DDPStudio.DDPStudio"
# Set to a path, the window writes its pid there once it is shown and its event loop runs: whoever started
# it (the installed app's tests, a script) waits on that instead of guessing how long a start takes.
READY_FILE_ENV = "DDPSTUDIO_GUI_READY_FILE"


def _say_ready_when_running(path: str | None) -> None:
    """Writes ``path`` (atomically) from the event loop's first turn, after the window was shown."""
    if not path:
        return
    from PySide6.QtCore import QTimer

    from ddpstudio.core.atomic import write_json

    QTimer.singleShot(0, lambda: write_json(path, {"pid": os.getpid()}))


def _windows_taskbar_identity(platform: Platform) -> None:
    """Without its own AppUserModelID a python(w).exe app shows Python's icon in the taskbar."""
    if platform.is_windows:
        import ctypes

        try:
            ctypes.windll.shell32.SetCurrentProcessExplicitAppUserModelID(APP_USER_MODEL_ID)  # type: ignore[attr-defined]
        except (AttributeError, OSError):
            pass


def _close_on_ctrl_c(app, window) -> None:
    """Ctrl+C in the terminal closes the window the normal way (asking first if a run trains).

    Qt's loop keeps Python from running signal handlers until some Python code
    runs; a wakeup socket watched by a QSocketNotifier provides that moment
    without polling.
    """
    import signal
    import socket

    from PySide6.QtCore import QSocketNotifier

    try:
        reader, writer = socket.socketpair()
        for sock in (reader, writer):
            sock.setblocking(False)
        signal.set_wakeup_fd(writer.fileno())
    except (OSError, ValueError):  # not the main thread, or no sockets: Ctrl+C simply does nothing
        return
    notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read, app)
    notifier.activated.connect(lambda *_: reader.recv(64))  # running this lets Python run the handler
    app._ctrl_c = (reader, writer, notifier)  # keep them alive as long as the app
    signal.signal(signal.SIGINT, lambda *_: window.close())


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
        _close_on_ctrl_c(app, window)
        _say_ready_when_running(os.environ.get(READY_FILE_ENV))
        return app.exec()
    finally:
        hook.uninstall()


if __name__ == "__main__":
    sys.exit(main())
