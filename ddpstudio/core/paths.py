"""Where DDP Studio keeps its files: per-user data, runs, stores, logs.

``DDPSTUDIO_HOME`` moves everything under one folder (tests, portable use);
otherwise platformdirs gives the per-user folders of the platform
(``%LOCALAPPDATA%\\DDPStudio`` on Windows, ``~/.local/share/ddpstudio`` on Linux).
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "DDPStudio"


def data_dir() -> Path:
    home = os.environ.get("DDPSTUDIO_HOME")
    if home:
        return Path(home)
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def data_dir_problem() -> str | None:
    """Why the data folder cannot be one (``DDPSTUDIO_HOME`` names a file, or a path through a file), or
    ``None``. Issue 27: doctor crashed, ``run`` said "Not a directory" and ``runs`` "no runs yet" (exit 0)."""
    home = data_dir()
    named = f"DDPSTUDIO_HOME ({home})" if os.environ.get("DDPSTUDIO_HOME") else f"DDP Studio's data folder {home}"
    fix = ("point DDPSTUDIO_HOME at a folder (a missing one is created), or unset it to use the per-user folder"
           if os.environ.get("DDPSTUDIO_HOME") else "move that file away")
    if home.exists() and not home.is_dir():
        return f"{named} is a file, not a folder; {fix}"
    base = home.absolute()
    while not base.exists() and base.parent != base:
        base = base.parent
    if not base.is_dir():
        return f"{named} cannot be created: {base} is a file, not a folder; {fix}"
    return None


def runs_dir() -> Path:
    return data_dir() / "runs"


def store_dir() -> Path:
    """The folder for fresh FileStore files; everything in it is ours."""
    return data_dir() / "stores"


def registry_dir() -> Path:
    return data_dir() / "registry"


def log_dir() -> Path:
    home = os.environ.get("DDPSTUDIO_HOME")
    if home:
        return Path(home) / "logs"
    import platformdirs

    return Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))


def config_dir() -> Path:
    home = os.environ.get("DDPSTUDIO_HOME")
    if home:
        return Path(home) / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))
