"""What the Start-menu shortcut runs: open the app, setting it up first if needed.

The shortcut points at the bootstrap venv's pythonw.exe (``-m
ddpstudio.bootstrap launch``), which exists from the moment the installer
finishes, rather than at the app's ``ddpstudio-gui.exe``, which exists only
after a successful setup. So a setup that failed or was interrupted during
installation is simply finished on first start.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Sequence

from ddpstudio.bootstrap import record
from ddpstudio.bootstrap.layout import Layout, wheel_version
from ddpstudio.bootstrap.process import no_console_flags

GUI_SCRIPT = "ddpstudio-gui"


def is_ready(layout: Layout) -> bool:
    """Set up, verified, and for the wheel that is installed now (not an older one)."""
    data = record.read(layout.record)
    if not data:
        return False
    wheel = layout.app_wheel()
    if wheel is not None and wheel_version(wheel) != data.get("app_version"):
        return False  # the installer brought a new version: set up again
    return layout.script(layout.env, GUI_SCRIPT).exists()


def start_app(layout: Layout, args: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """Starts the GUI detached from us; the launcher exits right after."""
    command = [str(layout.script(layout.env, GUI_SCRIPT)), *args]
    if layout.platform.is_windows:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=os.path.expanduser("~"),
            creationflags=no_console_flags(layout.platform) | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),
        )
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=Path.home(),
        start_new_session=True,
    )
