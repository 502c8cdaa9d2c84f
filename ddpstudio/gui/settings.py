"""Settings that outlive a session: window layout and the last run setup.

A JSON file under ``paths.config_dir()`` rather than QSettings, so
``DDPSTUDIO_HOME`` isolates tests and a user can read or delete it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ddpstudio.core import paths
from ddpstudio.core.atomic import write_json

log = logging.getLogger(__name__)
FILE_NAME = "gui.json"


class Settings:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.config_dir() / FILE_NAME
        self.values: dict[str, Any] = self._read()

    def _read(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable settings %s: %s", self.path, exc)
            return {}
        return raw if isinstance(raw, dict) else {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value

    def save(self) -> None:
        """Write atomically; a failure is logged, never raised (settings are not worth a crash)."""
        try:
            write_json(self.path, self.values)
        except OSError as exc:
            log.warning("could not save settings to %s: %s", self.path, exc)
