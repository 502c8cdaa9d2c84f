"""The app icon, shipped inside the package (``ddpstudio/gui/resources``, copied from the
repository's ``resources/`` where it is drawn)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QIcon

RESOURCES = Path(__file__).resolve().parent / "resources"


def app_icon() -> QIcon:
    icon = QIcon()
    for name in ("ddpstudio.ico", "ddpstudio.png"):
        path = RESOURCES / name
        if path.is_file():
            icon.addFile(str(path))
    return icon
