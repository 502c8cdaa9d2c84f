"""Where an installation keeps its parts, relative to its root folder.

On Windows the root is ``%LOCALAPPDATA%\\Programs\\DDPStudio`` (the NSIS
installer's ``$INSTDIR``); the Linux test uses a temporary folder. The NSIS
script creates the first four entries; the bootstrap creates the rest::

    uv.exe                 the bundled uv (``uv`` elsewhere)
    ddpstudio.ico          the shortcuts' icon
    wheels/                the app's wheel
    bootstrap/             a small venv: Python + the app wheel, no dependencies
    python/                uv-managed Python installations
    cache/                 uv's cache (hardlinked into env/, so it costs little)
    env/                   the app's environment: torch, Qt, the app
    env/ddpstudio-environment.json   the record, written after verification
    logs/bootstrap.log     every line the bootstrap showed
    logs/bootstrap.lock    held while a setup runs (one at a time)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.core.platform import Platform

RECORD_NAME = "ddpstudio-environment.json"
_WHEEL = re.compile(r"ddpstudio-(?P<version>[^-]+)-[^-]+-[^-]+-[^-]+\.whl")


def wheel_version(wheel: Path) -> str | None:
    """The version in a wheel's file name (ddpstudio-0.1.0-py3-none-any.whl -> 0.1.0)."""
    match = _WHEEL.fullmatch(wheel.name)
    return match.group("version") if match else None


@dataclass(frozen=True)
class Layout:
    """The paths of one installation."""

    root: Path
    platform: Platform

    @property
    def uv(self) -> Path:
        return self.root / ("uv.exe" if self.platform.is_windows else "uv")

    @property
    def wheels_dir(self) -> Path:
        return self.root / "wheels"

    @property
    def bootstrap_env(self) -> Path:
        return self.root / "bootstrap"

    @property
    def python_dir(self) -> Path:
        return self.root / "python"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def env(self) -> Path:
        return self.root / "env"

    @property
    def record(self) -> Path:
        return self.env / RECORD_NAME

    @property
    def log_file(self) -> Path:
        return self.root / "logs" / "bootstrap.log"

    @property
    def lock_file(self) -> Path:
        return self.root / "logs" / "bootstrap.lock"

    @property
    def network_file(self) -> Path:
        """Proxy, certificates and mirror settings (bootstrap.network)."""
        return self.root / "network.json"

    def _bin(self, venv: Path) -> Path:
        return venv / ("Scripts" if self.platform.is_windows else "bin")

    def python(self, venv: Path, windowed: bool = False) -> Path:
        """A venv's interpreter; ``windowed`` gives pythonw.exe on Windows (no console)."""
        if self.platform.is_windows:
            return self._bin(venv) / ("pythonw.exe" if windowed else "python.exe")
        return self._bin(venv) / "python"

    def script(self, venv: Path, name: str) -> Path:
        """An entry-point script such as ``ddpstudio-gui`` (``.exe`` on Windows)."""
        return self._bin(venv) / (name + (".exe" if self.platform.is_windows else ""))

    def app_wheel(self) -> Path | None:
        """The newest app wheel in wheels/ (an upgrade may leave an old one)."""
        wheels = [w for w in self.wheels_dir.glob("ddpstudio-*.whl") if wheel_version(w)]
        if not wheels:
            return None
        return max(wheels, key=lambda w: _version_key(wheel_version(w) or ""))


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.+-]", version))
