"""The one platform seam: every Windows/POSIX branch asks a ``Platform``.

Production code calls :func:`current`; tests construct ``Platform("windows")``
and pass it in, so each Windows branch runs on Linux too.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Platform:
    system: str  # "windows", "linux" or "darwin"

    @property
    def is_windows(self) -> bool:
        return self.system == "windows"

    @property
    def name(self) -> str:
        return {"windows": "Windows", "linux": "Linux", "darwin": "macOS"}.get(self.system, self.system)


WINDOWS = Platform("windows")
LINUX = Platform("linux")


def current() -> Platform:
    """The platform we run on. ``DDPSTUDIO_PLATFORM`` overrides it (tests only)."""
    forced = os.environ.get("DDPSTUDIO_PLATFORM")
    if forced:
        return Platform(forced)
    if sys.platform == "win32":
        return WINDOWS
    if sys.platform == "darwin":
        return Platform("darwin")
    return LINUX


# For every ``python -m ddpstudio...`` we start (launcher, recipe ranks, probes): Python 3.11's -P leaves the
# working folder off sys.path, which ``-m`` otherwise puts first, so a user's copy.py, random.py or queue.py
# in the folder a run starts from is never imported in place of the standard library's (DDP Studio needs 3.11).
SAFE_PATH = "-P"
