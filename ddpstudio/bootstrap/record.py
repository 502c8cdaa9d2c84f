"""What the bootstrap chose and verified, stored next to the environment.

The record exists only for an environment that passed verification: the
bootstrap deletes it before it changes anything and writes it (atomically)
as the very last step. The launcher treats "no record" as "not set up".
The app can read its own record with :func:`for_running_environment`
(``ddpstudio doctor`` shows it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ddpstudio.bootstrap.layout import RECORD_NAME

SCHEMA_VERSION = 1


def write(path: Path, data: dict[str, Any]) -> None:
    """Writes the record atomically: a crash leaves the old state, never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"schema": SCHEMA_VERSION, **data}, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def read(path: Path) -> dict[str, Any] | None:
    """The record, or None when there is none or it is unreadable (treated as not set up)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def clear(path: Path) -> None:
    """Marks the environment as not set up."""
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".tmp").unlink(missing_ok=True)


def for_running_environment() -> dict[str, Any] | None:
    """The record of the environment this Python runs in, if the bootstrap made it."""
    return read(Path(sys.prefix) / RECORD_NAME)
