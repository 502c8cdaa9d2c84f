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
